"""Transformer forecasting trained without teacher forcing, with an incremental decoder cache."""

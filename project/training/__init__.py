"""How the network is trained: regimes, the LightningModule, its callbacks (checkpoints, interval calibration, the
naive comparison), metrics and baselines."""

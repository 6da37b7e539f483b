"""Optional tools, each a command of its own: the benchmark, the ETTh1 and M4 results scripts and what they share,
the dataset downloads, hyperparameter search, export and serving, and backtesting.

Nothing outside this folder imports it: delete ``project/tools`` and ``tests/tools`` and the rest of the template
and its test suite work as before (``tests/test_core_without_tools.py`` and CI check it).
"""

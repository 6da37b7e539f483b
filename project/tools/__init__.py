"""Optional tools, each a command of its own: the benchmark (``bench``), the dataset downloads (``datasets``),
hyperparameter search (``tune``), export and serving (``export``, ``serve``), backtesting (``backtest``), a
checkpoint's forecasts as a figure (``figure``), what the tools that read a checkpoint share
(``checkpoint_commands``), and the line that says where a results table comes from (``stamp``).

Nothing outside this folder imports it but the studies of ``experiments/``, and it imports nothing from them: delete
``project/tools`` and ``tests/tools`` (with ``experiments/``) and the rest of the template and its test suite work as
before (``tests/cli/test_core_without_tools.py`` checks it, in CI too).
"""

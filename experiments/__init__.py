"""The evidence behind the README's claims, apart from the template: each study a config (``experiments/configs/``)
and a script a reader can rerun (``python -m experiments.etth1``, ``.m4``, ``.depth``, ``.intermittent``,
``.your_data``), what they share (``results``, ``statistical``, ``linear_baseline``), the tables they wrote
(``experiments/results/``), the results page (``experiments/README.md``) and ``python -m experiments.report``,
which writes every figure and verdict the README and the docs give from those tables.

Nothing in ``project/`` or ``tests/`` imports this folder: delete it and the template and its suite work as before
(``tests/cli/test_core_without_tools.py`` checks it, in CI too).
"""

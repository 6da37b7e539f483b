"""The suite's one command-line option, here at the root so that both test folders (tests/ and experiments/tests/)
see it, whichever is run; the fixtures live in tests/conftest.py."""

import os


def pytest_addoption(parser):
    parser.addoption(
        "--data-dir",
        default=os.environ.get("FORECAST_DATA_DIR"),
        help="folder holding ETTh1.csv and m4-hourly/ for the real-data tests (env FORECAST_DATA_DIR); "
        "without it those tests are skipped",
    )

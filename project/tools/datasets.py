"""Download the public datasets the README's results use, verify them, and write them where the configs look.

    python -m project.tools.datasets etth1        # data/ETTh1.csv (ETT-small, Zhou et al. 2021, CC BY-ND 4.0)
    python -m project.tools.datasets m4_hourly    # data/m4_hourly.csv (M4 competition, hourly: 414 series, long format)
    python -m project.tools.datasets m4_weekly    # data/m4_weekly.csv (M4 competition, weekly: 359 series)

Each file is checked against its SHA-256 before anything is written; ``--from`` takes a local copy (a file or a
folder) instead of downloading. Nothing existing is replaced without ``--overwrite``.

M4's files are wide (one row per series, padded with empty cells); ``m4_hourly.csv`` is the long format the
DataModule reads: columns ``series`` and ``value``, each series' training values followed by its test values (48
hours, 13 weeks), in time order. ``experiments/configs/m4_hourly.yaml`` and ``experiments/configs/m4_weekly.yaml``
take them as the test split.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import shutil
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from project.errors import InputError, reported_in_one_line
from project.files import check_output, write_atomically


@dataclass(frozen=True)
class Download:
    name: str
    url: str
    sha256: str


ETTH1 = Download(
    "ETTh1.csv",
    "https://raw.githubusercontent.com/zhouhaoyi/ETDataset/main/ETT-small/ETTh1.csv",
    "f18de3ad269cef59bb07b5438d79bb3042d3be49bdeecf01c1cd6d29695ee066",
)
M4_HOURLY = (
    Download(
        "Hourly-train.csv",
        "https://raw.githubusercontent.com/Mcompetitions/M4-methods/master/Dataset/Train/Hourly-train.csv",
        "ea59b7783573c49077a835ab6465c7d66f1474783360f310988a9a737fbca62f",
    ),
    Download(
        "Hourly-test.csv",
        "https://raw.githubusercontent.com/Mcompetitions/M4-methods/master/Dataset/Test/Hourly-test.csv",
        "71a57fccb15e534d973626ada4fb87febf789e9317715b7cc6dd3b5f90db6f42",
    ),
)
M4_WEEKLY = (
    Download(
        "Weekly-train.csv",
        "https://raw.githubusercontent.com/Mcompetitions/M4-methods/master/Dataset/Train/Weekly-train.csv",
        "d478d3f6ed673e6ed3c2cb0fbed5425f72eedd51318ebebeb0b5ecfcefc37714",
    ),
    Download(
        "Weekly-test.csv",
        "https://raw.githubusercontent.com/Mcompetitions/M4-methods/master/Dataset/Test/Weekly-test.csv",
        "3b2bc4be8e636e802260dcd843ca3c5da40536a1fbe1ecb3229a97dae4f44688",
    ),
)
M4 = {"m4_hourly": (M4_HOURLY, 48), "m4_weekly": (M4_WEEKLY, 13)}  # the files and the competition's horizon
M4_HORIZON = 48


def sha256_of(path: str | Path) -> str:
    """The SHA-256 of a file's bytes, read in blocks (a data file may be larger than memory)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(download: Download, folder: Path, source: Path | None = None) -> Path:
    """The verified file ``download.name`` in ``folder``: copied from ``source`` (a file, or a folder holding it)
    when given, otherwise downloaded. A checksum mismatch is an error and leaves nothing behind."""
    destination = folder / download.name
    if destination.is_file() and sha256_of(destination) == download.sha256:
        return destination
    if source is not None:
        origin = source / download.name if source.is_dir() else source
        if not origin.is_file():
            raise InputError(f"{origin}: not found")
        url = origin.resolve().as_uri()
    else:
        url = download.url

    def write(temporary: Path) -> None:
        try:
            with urllib.request.urlopen(url, timeout=60) as response, temporary.open("wb") as file:
                shutil.copyfileobj(response, file)
        except OSError as error:
            raise InputError(f"{url}: download failed ({error}); pass a local copy with --from") from None
        digest = sha256_of(temporary)
        if digest != download.sha256:
            raise InputError(
                f"{url}: checksum mismatch for {download.name} (got {digest[:12]}…, expected "
                f"{download.sha256[:12]}…); the file is not the published one"
            )

    return write_atomically(destination, write)


def m4_long_format(train: Path, test: Path, horizon: int = M4_HORIZON) -> pd.DataFrame:
    """M4's wide train and test files → one row per series and step: ``series``, ``value`` (training steps, then
    the ``horizon`` test steps)."""
    tests = {row[0]: row[1:] for row in _rows(test)}
    series, values = [], []
    for row in _rows(train):
        name, history = row[0], [value for value in row[1:] if value != ""]
        future = tests.get(name)
        if future is None or len(future) != horizon:
            raise InputError(f"{test}: series {name} needs {horizon} test values")
        series += [name] * (len(history) + horizon)
        values += [float(value) for value in history + future]
    return pd.DataFrame({"series": series, "value": values})


def prepare(dataset: str, folder: Path, source: Path | None, overwrite: bool) -> Path:
    if dataset == "etth1":
        check_output(folder / ETTH1.name, overwrite=overwrite)
        return fetch(ETTH1, folder, source)
    output = check_output(folder / f"{dataset}.csv", overwrite=overwrite)
    downloads, horizon = M4[dataset]
    raw = folder / dataset.replace("_", "-")
    train, test = (fetch(download, raw, source) for download in downloads)
    frame = m4_long_format(train, test, horizon)
    return write_atomically(output, lambda temporary: frame.to_csv(temporary, index=False))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m project.tools.datasets", description=__doc__.split("\n")[0])
    parser.add_argument("dataset", choices=["etth1", *M4])
    parser.add_argument("--dir", type=Path, default=Path("data"), help="where to write the data (default: data/)")
    parser.add_argument("--from", dest="source", type=Path, default=None, help="a local copy: file or folder")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    args = parser.parse_args(argv)
    with reported_in_one_line():
        path = prepare(args.dataset, args.dir, args.source, args.overwrite)
    print(f"Wrote {path}")


def _rows(path: Path) -> list[list[str]]:
    with path.open(newline="") as file:
        return list(csv.reader(file))[1:]


if __name__ == "__main__":
    main()

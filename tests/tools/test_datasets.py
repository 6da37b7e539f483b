"""Downloading and converting the public datasets (an optional tool: it goes with project/tools)."""

import hashlib

import pandas as pd
import pytest

from project.errors import InputError
from project.tools import datasets
from tests.helpers import assert_refused_in_one_line


def test_a_download_is_verified_before_it_is_written(tmp_path):
    source = tmp_path / "ETTh1.csv"
    source.write_text("date,OT\n2016-07-01 00:00:00,1.0\n")
    good = datasets.Download("ETTh1.csv", "unused", hashlib.sha256(source.read_bytes()).hexdigest())
    assert datasets.fetch(good, tmp_path / "data", source).read_text() == source.read_text()
    bad = datasets.Download("other.csv", "unused", "0" * 64)
    (tmp_path / "other.csv").write_text("tampered\n")
    with pytest.raises(InputError, match=r"checksum mismatch for other.csv"):
        datasets.fetch(bad, tmp_path / "data", tmp_path / "other.csv")
    assert not (tmp_path / "data" / "other.csv").exists()
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["ETTh1.csv"]  # no partial file left


def test_the_m4_converter_writes_each_series_training_then_test_values(tmp_path):
    train, test = tmp_path / "train.csv", tmp_path / "test.csv"
    header = ",".join(f'"V{i}"' for i in range(1, 6))
    train.write_text(f'{header}\n"H1","1","2","3",""\n"H2","5","6","7","8"\n')
    test_header = ",".join(f'"V{i}"' for i in range(1, 50))
    values = ",".join(f'"{v}"' for v in range(100, 148))
    test.write_text(f'{test_header}\n"H1",{values}\n"H2",{values}\n')
    frame = datasets.m4_long_format(train, test)
    assert frame.groupby("series").size().to_dict() == {"H1": 3 + 48, "H2": 4 + 48}
    assert frame[frame["series"] == "H1"]["value"].tolist()[:4] == [1.0, 2.0, 3.0, 100.0]


def test_the_datasets_command_writes_from_a_local_copy_and_keeps_what_exists(data_dir, tmp_path, capsys):
    datasets.main(["etth1", "--from", str(data_dir), "--dir", str(tmp_path)])
    assert (tmp_path / "ETTh1.csv").read_bytes() == (data_dir / "ETTh1.csv").read_bytes()
    again = ["etth1", "--from", str(data_dir), "--dir", str(tmp_path)]
    assert_refused_in_one_line(lambda: datasets.main(again), capsys, "already exists")
    datasets.main(["m4_hourly", "--from", str(data_dir / "m4-hourly"), "--dir", str(tmp_path)])
    frame = pd.read_csv(tmp_path / "m4_hourly.csv")
    assert frame["series"].nunique() == 414

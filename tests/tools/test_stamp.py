"""A results table says where it comes from: the command, the commit the work started at, the machine and the date."""

import re

from project.tools import stamp


def test_a_stamp_names_the_command_the_commit_and_the_machine():
    line = stamp.stamp(["--seeds", "0", "1", "--output", "a table.md"])
    command = r"`python -m \S+ --seeds 0 1 --output 'a table.md'`"
    assert re.fullmatch(rf"Written by {command} at commit \w+(\+changes)? on .+, \d{{4}}-\d\d-\d\d\.", line)


def test_a_stamp_names_the_commit_the_work_started_at(monkeypatch):
    heads = iter(["aaaaaaa", "bbbbbbb"])  # HEAD moves on while the runs go on
    monkeypatch.setattr(stamp, "_git", lambda *arguments: next(heads) if arguments[0] == "rev-parse" else "")
    stamp.run_commit.cache_clear()
    try:
        started = stamp.run_commit()
        assert (started, stamp.run_commit()) == ("aaaaaaa", "aaaaaaa")
        assert "at commit aaaaaaa on" in stamp.stamp([])
    finally:
        stamp.run_commit.cache_clear()


def test_a_stamp_names_no_absolute_path(tmp_path):
    """Paths inside the repository are written from its root, any other as <outside>/ and its last part: a stamp
    names no one's folders."""
    data = stamp.REPOSITORY / "data" / "ETTh1.csv"
    line = stamp.stamp(
        [f"--data={data}", "--logs", str(tmp_path / "logs"), "--monitor=val/loss", f"[{tmp_path / 'a'}, {data}]"]
    )
    assert "--data=data/ETTh1.csv --logs '<outside>/logs' --monitor=val/loss '[<outside>/a, data/ETTh1.csv]'" in line
    assert str(tmp_path) not in line
    assert str(stamp.REPOSITORY) not in line
    assert stamp.portable("https://example.org/a") == "https://example.org/a"
    assert stamp.portable(stamp.portable(str(tmp_path / "logs"))) == "<outside>/logs"

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

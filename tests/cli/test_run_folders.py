"""Where a run writes (``project.run_folders``), without training: the end-to-end promises are in
``tests/cli/test_cli.py`` and ``tests/cli/test_guards.py``."""

import pytest
from lightning.pytorch.callbacks import ModelCheckpoint

from project.errors import InputError
from project.run_folders import callbacks_in_use, find_last_checkpoint, no_logger


def test_the_last_checkpoint_is_the_newest_versions_by_number_not_by_name(tmp_path):
    for version in ("version_2", "version_10", "version_9", "version_x"):
        (tmp_path / version / "checkpoints").mkdir(parents=True)
        (tmp_path / version / "checkpoints" / "last.ckpt").touch()
    assert find_last_checkpoint(tmp_path) == tmp_path / "version_10" / "checkpoints" / "last.ckpt"
    assert find_last_checkpoint(tmp_path / "elsewhere") is None


@pytest.mark.parametrize(("logger", "off"), [(False, True), ([], True), (None, False), (True, False)])
def test_only_false_or_an_empty_list_turns_logging_off(logger, off):
    assert no_logger(logger) is off


def test_without_a_logger_checkpoints_are_kept_only_in_a_folder_the_user_names():
    named = ModelCheckpoint(dirpath="ckpts")
    assert callbacks_in_use({"logger": False}, [named]) == [named]
    assert callbacks_in_use({"logger": False}, [ModelCheckpoint()]) == []
    trainer_config = {"logger": False}
    assert callbacks_in_use(trainer_config, []) == []
    assert trainer_config["enable_checkpointing"] is False
    with pytest.raises(InputError, match="needs a folder for the checkpoints"):
        callbacks_in_use({"logger": False, "enable_checkpointing": True}, [ModelCheckpoint()])

"""Schedules that follow the run that happens (issue 77): ``WarmupStableDecay``'s curve, the decay that
``AnnealThenStop`` starts where early stopping would stop and that ends the run, and what the end of a fit says."""

import math

import lightning as L
import pytest
import torch

from project.training.callbacks import AnnealThenStop, ForecastCheckpoint
from project.training.schedules import WarmupStableDecay
from tests.helpers import ScriptedValidation, quiet_trainer


def schedule(warmup: int = 10, share: float = 0.2) -> WarmupStableDecay:
    return WarmupStableDecay(torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0), warmup, share)


def stepped(scheduler: WarmupStableDecay, steps: int) -> WarmupStableDecay:
    for _ in range(steps):
        scheduler.optimizer.step()
        scheduler.step()
    return scheduler


def test_the_rate_warms_up_then_holds_its_peak_while_the_run_has_no_known_end():
    scheduler = schedule(warmup=10)
    assert [scheduler.factor(step) for step in (0, 4, 9)] == [0.1, 0.5, 1.0]
    assert [scheduler.factor(step) for step in (10, 1000, 10**6)] == [1.0, 1.0, 1.0]
    assert not stepped(scheduler, 500).decayed()


def test_the_decay_takes_a_share_of_the_steps_before_it_and_ends_at_zero():
    scheduler = stepped(schedule(warmup=10, share=0.2), 400)
    scheduler.start_decay()
    scheduler.start_decay()  # once started, it stays where it started
    assert scheduler.decay_steps() == (400, 80)
    assert scheduler.factor(400) == 1.0
    assert scheduler.factor(440) == pytest.approx(0.5)
    assert scheduler.factor(480) == scheduler.factor(10**6) == 0.0
    assert not stepped(scheduler, 79).decayed()
    assert stepped(scheduler, 1).decayed()
    assert scheduler.optimizer.param_groups[0]["lr"] == 0.0
    assert scheduler.state_dict()["decay_start"] == 400  # a resumed fit takes it (its progress)


def test_a_run_of_known_length_ends_annealed_at_its_last_step():
    """``max_steps`` 1200: the decay of a fifth of the steps before it starts at 1000 and ends at 1200; a plateau
    before then starts it sooner."""
    scheduler = schedule(warmup=10, share=0.2)
    scheduler.set_run_steps(1200)
    assert scheduler.decay_steps() == (1000, 200)
    assert scheduler.factor(999) == 1.0
    assert scheduler.factor(1200) == 0.0
    stepped(scheduler, 300).start_decay()
    assert scheduler.decay_steps() == (300, 60)


def scripted_fit(losses: list[float], callbacks: list, decay_share: float | None = 0.5, **limits) -> L.Trainer:
    """A fit of ``ScriptedValidation`` (its decay half the steps before it), validated every 4 steps across epochs."""
    limits = {"max_steps": 1000, "enable_checkpointing": False, **limits}
    trainer = quiet_trainer(
        num_sanity_val_steps=0, callbacks=callbacks, val_check_interval=4, check_val_every_n_epoch=None, **limits
    )
    trainer.fit(ScriptedValidation(losses, decay_share))
    return trainer


class Rates(L.Callback):
    """The learning rate and the step of each validation, and the weight at each step's start."""

    def __init__(self) -> None:
        self.validations, self.weights = [], {}

    def on_validation_end(self, trainer, pl_module):
        self.validations.append((trainer.global_step, trainer.optimizers[0].param_groups[0]["lr"]))

    def on_train_batch_start(self, trainer, pl_module, *args):
        self.weights[trainer.global_step] = float(pl_module.weight)


def test_where_early_stopping_would_stop_the_rate_decays_to_zero_and_the_run_ends_after_one_more_validation():
    """A validation every 4 steps; val/loss improves until step 8 and never after: with a patience of 2 validations,
    early stopping would stop at step 16. There the decay starts (8 steps, half of 16), and the run stops at step 24,
    validated there at a rate of zero."""
    rates, stopping = Rates(), AnnealThenStop("val/loss", patience=2)  # restore_best: the default
    trainer = scripted_fit([3.0, 2.0, 2.5], [rates, stopping])
    steps = [step for step, _ in rates.validations]
    assert steps == [4, 8, 12, 16, 20, 24]
    assert trainer.global_step == 24
    assert rates.validations[3][1] == pytest.approx(0.01)  # the peak, where early stopping would have stopped
    assert rates.validations[4][1] == pytest.approx(0.005)  # half-way down the cosine
    assert rates.validations[5][1] == 0.0
    assert rates.weights[16] == rates.weights[8] != rates.weights[15]  # the decay starts from the best weights


def test_the_decay_may_start_from_the_weights_the_run_has():
    rates, stopping = Rates(), AnnealThenStop("val/loss", patience=2, restore_best=False)
    trainer = scripted_fit([3.0, 2.0, 2.5], [rates, stopping])
    assert trainer.global_step == 24
    assert rates.weights[16] != rates.weights[8]
    assert stopping.best_weights is None


def test_without_a_decaying_schedule_it_stops_as_early_stopping_does():
    trainer = scripted_fit([3.0, 2.0, 2.5], [AnnealThenStop("val/loss", patience=2)], decay_share=None)
    assert trainer.global_step == 16


@pytest.mark.parametrize(
    ("limits", "losses", "said"),
    [
        (  # validation stops improving at step 8; the decay from step 16 to 24 ends the run
            {"max_steps": 1000},
            [3.0, 2.0, 2.5],
            "converged: val/loss stopped improving, so the learning rate decayed to zero over steps 16–24; the best "
            "checkpoint is step 8's",
        ),
        (  # still improving at step 24: the budget's decay (from 16, 24 / 1.5) ended the run
            {"max_steps": 24},
            [6.0, 5.0, 4.0, 3.0, 2.0, 1.0],
            "trainer.max_steps=24 ended the run before val/loss stopped improving (its best at step 24): the learning "
            "rate decayed to zero over the last 8 steps; raise trainer.max_steps=24 to train longer",
        ),
    ],
    ids=["converged", "ended-by-the-budget"],
)
def test_the_end_of_a_fit_says_whether_it_converged_or_which_limit_ended_it(tmp_path, capsys, limits, losses, said):
    checkpoint = ForecastCheckpoint(dirpath=tmp_path, monitor="val/loss")
    callbacks = [checkpoint, AnnealThenStop("val/loss", patience=2)]
    trainer = scripted_fit(losses, callbacks, enable_checkpointing=True, **{"max_steps": 1000, **limits})
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert notes == [f"note: {said}"]
    assert math.isfinite(trainer.optimizers[0].param_groups[0]["lr"])

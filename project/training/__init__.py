"""How the network is trained: regimes, the LightningModule, its callbacks, metrics and baselines. The regimes, the
normalisations and the learning-rate schedule are importable from here, as a config names them
(``project.training.FreeRunning``)."""

from project.training.normalisation import InstanceNorm, LastValueNorm, Normalisation
from project.training.regimes import FreeRunning, Regime, ScheduledSampling, TeacherForcing
from project.training.schedules import WarmupCosine, WarmupStableDecay

__all__ = [
    "FreeRunning",
    "InstanceNorm",
    "LastValueNorm",
    "Normalisation",
    "Regime",
    "ScheduledSampling",
    "TeacherForcing",
    "WarmupCosine",
    "WarmupStableDecay",
]

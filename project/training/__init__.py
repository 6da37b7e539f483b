"""How the network is trained: regimes, reference loops, the LightningModule, memory accounting, baselines."""

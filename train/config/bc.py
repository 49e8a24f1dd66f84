"""Behaviour cloning's config (the pipeline's `bc` section; train/bc.py)."""
from __future__ import annotations

import dataclasses

from train.config.base import fail


@dataclasses.dataclass(frozen=True)
class BCConfig:
    archetype: str = "reciprocator"  # NPC heuristic imitated in the learner seats
    num_envs: int = 64
    num_steps: int = 100  # collected steps per env (N = num_envs x num_steps samples)
    epochs: int = 30
    num_minibatches: int = 8
    lr: float = 1e-3
    max_grad_norm: float = 1.0
    vf_coef: float = 0.5  # also fit the critic to the behaviour's returns (a calibrated PPO start); 0 = actor only
    reward_scale: float = 0.1  # value targets = reward_scale x return (same convention as PPO)
    validity_coef: float = 0.0  # extra weight on the validity term (UnmaskedEnv: the env's masks as targets)
    gamma: float = 0.99
    hedge_prob: float = 0.0  # the teacher vaults each resource at the start with this probability (npc_behaviour)
    hedge_margin: int = 9  # ... and its UNVAULTs arrive this many steps before the end
    dagger_rounds: int = 0  # DAgger: roll the fitted policy, label its states with the teacher, refit
    dagger_epochs: int = 30  # epochs per DAgger round, over the teacher's data + that round's

    def check(self, prefix: str = "") -> None:
        """Range checks (`build` calls it); ConfigError naming `prefix + key`."""
        if not 0.0 <= self.hedge_prob <= 1.0:
            fail(prefix + "hedge_prob", f"must be in [0, 1], got {self.hedge_prob}")
        for k in ("hedge_margin", "dagger_rounds", "dagger_epochs"):
            if getattr(self, k) < 0:
                fail(prefix + k, f"must be >= 0, got {getattr(self, k)}")

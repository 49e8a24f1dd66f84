"""Network-specific knobs, each with its network (PPOConfig's `network` key picks the network)."""
from __future__ import annotations

import dataclasses

from train.config.base import fail

MEMORY_KINDS = ("none", "gru")  # `memory`: feedforward, or a GRU core between encoder and heads (train/memory.py)
SLOT_RULES = ("edf", "edf_chain")  # the rules the slot scorer reads from the slot features (envs/crisis/heuristics)


@dataclasses.dataclass(frozen=True)
class SlotConfig:
    """`network: slot` (crisis-v0, flat head): one small network scores every task slot's REQUEST actions
    (`train.networks.SlotActor`, over `env.spec.slot_layout`), optionally steered by a hand-written rule."""

    prior: float = 0.0  # fixed logit offset on the rule's action (> 0: a fresh policy starts near the rule)
    feature: bool = False  # the rule's pick (per slot) and its slot's features as inputs
    rule: str = "edf"  # the rule `prior` / `feature` name: edf | edf_chain (needs env.dependency_features)
    tight: float = 0.15  # edf_chain: slack feature (hours / episode hours) under which a task is tight (1.2 h)

    def check(self, prefix: str = "") -> None:
        """Range checks (`build` calls it); ConfigError naming `prefix + key`."""
        if self.rule not in SLOT_RULES:
            fail(prefix + "rule", f"must be one of {SLOT_RULES}, got {self.rule!r}")
        if not self.prior >= 0:
            fail(prefix + "prior", f"must be >= 0, got {self.prior!r}")
        if not self.tight > 0:
            fail(prefix + "tight", f"must be > 0, got {self.tight!r}")

    @property
    def is_default(self) -> bool:
        return self == SlotConfig()

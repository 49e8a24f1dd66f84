"""GRPO's config (the pipeline's `grpo` section; train/grpo.py)."""
from __future__ import annotations

import dataclasses

from train.config.base import fail


@dataclasses.dataclass(frozen=True)
class GRPOConfig:
    group_size: int = 8  # G episodes per group (shared reset key)
    num_groups: int = 8  # B groups per update
    num_updates: int = 20
    episode_steps: int = 0  # steps per episode; 0 = the env's max_steps
    update_epochs: int = 2
    num_minibatches: int = 2  # over groups (must divide num_groups)
    group_chunk: int = 0  # groups per rollout / gradient chunk; 0 = no chunking
    lr: float = 3e-4
    clip_eps: float = 0.2
    kl_coef: float = 0.05
    ent_coef: float = 0.0
    invalid_penalty: float = 0.0  # extra cost per invalid action in the returns advantages use (a format reward)
    max_grad_norm: float = 0.5
    adv_mode: str = "episode"  # episode | step
    adv_eps: float = 1e-8
    gamma: float = 1.0  # discount of the per-step returns-to-go (adv_mode=step)
    share_step_keys: bool = True  # same step keys inside a group (same shocks), not only the reset key
    pool_agents: bool = False  # group statistics pooled over learner seats (else per seat)

    def steps(self, env) -> int:
        return self.episode_steps or env.max_steps

    def env_steps_per_update(self, env) -> int:
        return self.num_groups * self.group_size * self.steps(env)

    def chunk(self) -> int:
        return self.group_chunk or self.num_groups // self.num_minibatches

    def check(self, prefix: str = "") -> None:
        """Range and consistency checks (`build` and `make_grpo_train` call it); ConfigError naming `prefix + key`."""
        bad = lambda key, msg: fail(prefix + key, msg)  # noqa: E731
        for k in ("group_size", "num_groups", "num_updates", "update_epochs", "num_minibatches"):
            if getattr(self, k) < 1:
                bad(k, f"must be >= 1, got {getattr(self, k)}")
        if self.group_size < 2:
            bad("group_size", "a group needs at least 2 episodes")
        if self.num_groups % self.num_minibatches:
            bad("num_minibatches", f"must divide num_groups={self.num_groups}")
        mb = self.num_groups // self.num_minibatches
        if self.group_chunk < 0 or (self.group_chunk and (mb % self.group_chunk or self.num_groups % self.group_chunk)):
            bad("group_chunk", f"must divide the groups per minibatch ({mb}), got {self.group_chunk}")
        if self.adv_mode not in ("episode", "step"):
            bad("adv_mode", f"must be episode or step, got {self.adv_mode!r}")
        for k in ("clip_eps", "kl_coef", "ent_coef", "max_grad_norm", "adv_eps", "invalid_penalty"):
            if getattr(self, k) < 0:
                bad(k, "must be >= 0")
        if not self.lr > 0:
            bad("lr", "must be > 0")

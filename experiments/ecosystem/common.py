"""What the ecosystem study's scripts share: the arguments of an upstream-style learning run, `--set` overrides."""
from __future__ import annotations

import nexus_jax
from nexus_jax.cli import UserInputError, positive_int

def overrides(items: list[str], defaults: dict) -> dict:
    """`--set` KEY=VALUE strings -> {KEY: value of the default's type} for keys of an upstream config."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in defaults:
            raise UserInputError(f"--set {item!r}: expected KEY=VALUE with KEY one of {sorted(defaults)}")
        try:
            out[key] = type(defaults[key])(float(value)) if not isinstance(defaults[key], str) else value
        except ValueError:
            raise UserInputError(f"--set {item!r}: {value!r} is not a number") from None
    return out
def as_summary(result: dict) -> dict:
    """An evaluation result's {"return_mean", "return_ci95"} -> train.stats' {"mean", "ci95"} (for `ci_above`)."""
    return {"mean": result["return_mean"], "ci95": result["return_ci95"]}
def add_learning_run_args(ap, seed: int, eval_seed: int) -> None:
    """The arguments every script of this study that trains an upstream-style learner on nexus shares: the env,
    the batch, the budget, the seeds and the evaluation (each script adds its own on top)."""
    ap.add_argument("--env-id", default=nexus_jax.DEFAULT_ENV)
    ap.add_argument("--num-envs", type=positive_int, default=64)
    ap.add_argument("--total-timesteps", type=float, default=2e6)
    ap.add_argument("--episodes", type=positive_int, default=1024, help="evaluation episodes")
    ap.add_argument("--seed", type=int, default=seed)
    ap.add_argument("--num-seeds", type=positive_int, default=1, help="train seeds seed, seed+1, ... (vmapped)")
    ap.add_argument("--eval-seed", type=int, default=eval_seed, help="episode keys of every evaluation")

"""An env's episode metrics as a fold over its steps: what the evaluator (`nexus_jax.rollout.evaluate`) reads."""
from __future__ import annotations

from typing import Callable, NamedTuple


class EpisodeMetrics(NamedTuple):
    """Three pure functions over one env (vmap them for a batch).

    `init(state, params) -> acc`: the totals of an episode that starts in `state`;
    `update(acc, state, info, params) -> acc`: add one step, `state` the state it started from,
    `info` what `step` returned (the env's full info, `info_mode="full"`);
    `summary(acc) -> {metric: array}`: the episode's metrics.
    """

    init: Callable
    update: Callable
    summary: Callable

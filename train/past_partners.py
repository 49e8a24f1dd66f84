"""Past partners: some learner seats played by a past snapshot of the policy (fictitious self-play).

In self-play every seat plays the policy being trained, so what one seat learns to expect of its partners
moves as fast as the partners do: a population that finds trade can lose it together, each seat's gradient
following partners that trade a little less each update (`docs/reports/sp16-v2-ap/`: seeds that find trade
and fall back to autarky). Past partners keep part of every rollout's partners fixed, as fictitious self-play
(Heinrich et al. 2015) and OpenAI Five's 80/20 mix of current and past selves do: with `past_partners = p`,
each learner seat of each env is, for one rollout, played with probability p by a snapshot drawn uniformly
from those taken after update 0 so far (`train/snapshots.py`, every `snapshot_every` updates; the freshly
initialised policy of slot 0 is left out). Until the first such snapshot every seat plays the current policy.

Only the seats the current policy played enter PPO's loss (`Transition.learn`); a past seat's steps still
shape its partners' rewards, and advantage alignment reads its advantage like any other seat's.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp


class PastPartners(NamedTuple):
    """One rollout's draw: the snapshot's params and which (env, seat) it plays ((E, A) bool)."""

    params: Any
    frozen: jnp.ndarray


def check_past_partners(frac: float, num_learners: int, snapshot_every: int) -> None:
    """`past_partners > 0` needs two learner seats and a snapshot pool; ValueError naming what is missing."""
    if frac <= 0:
        return
    if num_learners < 2:
        raise ValueError(f"past_partners={frac} needs an env with at least two learner seats (self-play), "
                         f"this one has {num_learners}")
    if snapshot_every <= 0:
        raise ValueError(f"past_partners={frac} draws partners from the snapshots: needs snapshot_every != 0 "
                         "(python -m train keeps them; train.pipeline's PPO stage has none)")


def draw(key, snapshots, update_idx, every: int, num_envs: int, num_learners: int, frac: float) -> PastPartners:
    """The past partners of the rollout of update `update_idx` (traced): a slot uniform over the snapshots
    taken after update 0 so far (slots 1 .. update_idx // every of the `snapshot_buffer`), and each (env,
    seat) frozen with probability `frac`; none frozen before the first snapshot."""
    k_slot, k_seat = jax.random.split(key)
    n_slots = jax.tree.leaves(snapshots)[0].shape[0]
    taken = jnp.minimum(update_idx // every, n_slots - 1)
    slot = 1 + jax.random.randint(k_slot, (), 0, jnp.maximum(taken, 1))
    params = jax.tree.map(lambda buf: buf[jnp.minimum(slot, n_slots - 1)], snapshots)
    frozen = (jax.random.uniform(k_seat, (num_envs, num_learners)) < frac) & (taken >= 1)
    return PastPartners(params, frozen)


def mix(frozen: jnp.ndarray, current: jnp.ndarray, past: jnp.ndarray) -> jnp.ndarray:
    """Actions (E, A) flat or (E, A, 5) structured: the past policy's where `frozen` (E, A), else the current's."""
    return jnp.where(frozen.reshape(frozen.shape + (1,) * (current.ndim - frozen.ndim)), past, current)

"""Record whole episodes on the device for drawing on the host: one jitted `rollout.run` that keeps every state.

`collect(env, act, key)` runs `num_episodes` episodes of a registered env (`nexus_jax.make`)
with any act function of the rollout's signature (`nexus_jax.rollout.Act`: a trained policy,
NPC heuristics, `random_policy`, `transcript_policy` of a text seat's moves) and returns one
`Episode` per env: the T + 1 states (the reset state, then the state after each step), the
acting seats' actions, rewards and the env's info of each step, cut at the step the episode
ended. The env is stepped without its auto-reset (`rollout.EpisodeEnv`), so the last state is
the episode's own, not a fresh one's.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from nexus_jax import rollout


@dataclasses.dataclass
class Episode:
    """One recorded episode, as NumPy on the host.

    `states` has leaves (T + 1, ...): the reset state and the state after each of the T steps;
    `actions` (T, A, ...) are the acting seats' (`env.agents`), `rewards` (T, A), `info` the
    env's info of each step (leaves (T, ...)), `done` whether the episode ended within the
    steps collected.
    """

    states: Any
    actions: np.ndarray
    rewards: np.ndarray
    info: dict
    done: bool

    def __len__(self) -> int:
        """Steps taken (T)."""
        return int(self.actions.shape[0])

    def state(self, t: int):
        """The state after t steps (0: the reset state)."""
        if not 0 <= t <= len(self):
            raise IndexError(f"state {t}: the episode has states 0..{len(self)}")
        return jax.tree.map(lambda x: x[t], self.states)

    def step_info(self, t: int) -> Optional[dict]:
        """The info of the step that led to state t (None for the reset state)."""
        if not 0 <= t <= len(self):
            raise IndexError(f"step info {t}: the episode has states 0..{len(self)}")
        return None if t == 0 else jax.tree.map(lambda x: x[t - 1], self.info)


def collect(env, act: rollout.Act, key, num_episodes: int = 1, num_steps: Optional[int] = None,
            params: Any = None) -> list[Episode]:
    """Run `num_episodes` episodes of `env` with `act` in one jitted `rollout.run` -> one `Episode` each.

    `act(key, obs (E, A, D), state (E,), masks) -> (action (E, A[, 5]), extra)` as in
    `nexus_jax.rollout`; masks are those of the env's action format (`rollout.EpisodeEnv`).
    `num_steps`: steps to run (default the params' `max_steps`); an episode that ends sooner
    is cut at its last step. `params`: the env params to reset and step with (default the env's).
    """
    params = env.default_params if params is None else params
    num_steps = int(np.asarray(params.max_steps)) if num_steps is None else int(num_steps)
    if num_episodes < 1 or num_steps < 1:
        raise ValueError(f"collect: num_episodes and num_steps must be >= 1, got {num_episodes} and {num_steps}")
    def record(acc, s: rollout.Step):
        return acc, (s.state, s.action, s.reward, s.done, s.info)

    @jax.jit
    def run(key, params):
        (_, last, _), steps = rollout.run(rollout.EpisodeEnv(env, params), key, num_episodes, num_steps, act, record,
                                          None, params)
        return last, steps

    last, (states, actions, rewards, done, info) = jax.device_get(run(key, params))
    states = jax.tree.map(lambda s, f: np.concatenate([s, f[None]]), states, last)  # (T + 1, E, ...)
    episodes = []
    for e in range(num_episodes):
        ended = np.flatnonzero(done[:, e])
        t = int(ended[0]) + 1 if ended.size else num_steps
        cut = lambda x, n: np.asarray(x[:n, e])  # noqa: E731
        episodes.append(Episode(states=jax.tree.map(lambda x: cut(x, t + 1), states), actions=cut(actions, t),
                                rewards=cut(rewards, t), info=jax.tree.map(lambda x: cut(x, t), info),
                                done=bool(ended.size)))
    return episodes


def random_policy(key, obs, state, masks):
    """A uniformly random valid flat action per acting seat (`rollout.random_valid_action`), for flat-mask envs."""
    if not hasattr(masks, "shape"):
        raise TypeError("random_policy draws from flat (E, A, n) masks; an env with action_format='structured' "
                        "gives factored masks: make it with the default action_format='flat'")
    keys = jax.random.split(key, masks.shape[0])
    return jax.vmap(rollout.random_valid_action)(keys, obs, masks), None


def transcript_policy(actions) -> Callable:
    """An act function that plays recorded moves: `actions` (T, A[, 5]), the acting seats' action at each step
    (e.g. `nexus_jax.play`'s `PlayResult.actions`, (T, A, W); a width of 1 is a flat index). Past the
    last move it repeats the last one. The env's own randomness (NPCs, shocks) is the collect key's."""
    moves = jnp.asarray(actions, jnp.int32)
    if moves.ndim == 3 and moves.shape[-1] == 1:
        moves = moves[..., 0]
    if moves.ndim not in (2, 3) or moves.shape[0] < 1:
        raise ValueError(f"transcript_policy: actions must be (T, A) or (T, A, 5) with T >= 1, got {moves.shape}")

    def act(key, obs, state, masks):
        t = jnp.minimum(state.step, moves.shape[0] - 1)
        return moves[t], None

    return act

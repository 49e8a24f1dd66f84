"""The trainer's view of any registered env with the JaxMARL-style API: learner seats stacked as arrays.

Only `env.agents` are learners (the seats the caller acts for); NPC seats, if the env has
them, act inside `env.step`. Arrays carry the learner axis A = len(env.agents) right
after the batch axis. Factored masks are taken from `env.factored_action_masks`; when that
returns rows for every seat, the learner rows are picked by seat index (`agent_<i>`).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import nexus_jax

from train.networks import _row, masked_categorical


def _seat(agent: str, fallback: int) -> int:
    tail = agent.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else fallback


@dataclasses.dataclass(frozen=True, eq=False)
class LearnerEnv:
    """Stacks an env's dict API over its learner seats; hashable by identity so jit can close over it."""

    env: Any
    action_head: str = "factored"  # "factored" | "flat"
    params: Any = None  # env params every reset, step and mask uses (traced, e.g. one sweep cell's rules); None: the env's

    def with_params(self, params) -> "LearnerEnv":
        """The same view stepping under `params` (traced: a sweep vmaps over them with one compilation)."""
        return dataclasses.replace(self, params=params)

    @classmethod
    def make(cls, env_id: str, env_kwargs: dict | None = None, action_head: str = "factored") -> "LearnerEnv":
        """The trainer reads every seat's info (`info_mode="full"`); factored heads act with (5,) rows
        (`action_format="structured"`), the flat head with indices."""
        kwargs = {"info_mode": "full", **(env_kwargs or {})}
        env = nexus_jax.make(env_id, **kwargs)
        if action_head == "factored":
            if "structured" not in env.spec.action_formats:
                raise ValueError(f"config key 'action_head': env {env_id!r} has no factored action view; use "
                                 "action_head=flat")
            if "action_format" not in kwargs and env.action_format != "structured":
                env = nexus_jax.make(env_id, **kwargs, action_format="structured")
        return cls(env, action_head)

    # ---- static facts -------------------------------------------------------------------
    @property
    def agents(self) -> list[str]:
        return list(self.env.agents)

    @property
    def num_learners(self) -> int:
        return len(self.env.agents)

    @property
    def seat_indices(self) -> tuple[int, ...]:
        """The learner seats' indices among all N seats (from `agent_<i>`), as Python ints."""
        return tuple(_seat(a, i) for i, a in enumerate(self.env.agents))

    @property
    def seats(self) -> jnp.ndarray:
        return jnp.asarray(self.seat_indices, jnp.int32)

    @property
    def obs_dim(self) -> int:
        return int(self.env.observation_space(self.env.agents[0]).shape[0])

    @property
    def nvec(self) -> tuple[int, ...]:
        """Head sizes of the factored view (type, target, amount_1, amount_2, resource)."""
        return tuple(int(v) for v in self.env.factored_action_spaces[self.env.agents[0]].nvec)

    @property
    def num_actions(self) -> int:
        return int(self.env.action_space(self.env.agents[0]).n)

    @property
    def slot_layout(self) -> tuple | None:
        """The env's task-slot layout for `SlotActor` (`env.spec.slot_layout`), None when it has none."""
        return self.env.spec.slot_layout

    @property
    def default_params(self):
        """The params this view steps under: `params`, else the env's."""
        return self.env.default_params if self.params is None else self.params

    @property
    def episode_metrics(self):
        """The env's episode metrics (`nexus_jax.rollout.evaluate(..., metrics=True)` reads them)."""
        return self.env.episode_metrics

    @property
    def max_steps(self) -> int:
        return int(self.env.default_params.max_steps)

    # ---- pure functions over one env --------------------------------------------------------
    def stack(self, d: dict) -> jnp.ndarray:
        return jnp.stack([d[a] for a in self.env.agents])

    def reset(self, key):
        """-> (obs (A, D), state)."""
        obs, state = self.env.reset(key, self.params)
        return self.stack(obs), state

    def step(self, key, state, actions, params=None):
        """actions (A,) flat or (A, 5) structured -> (obs (A, D), state, reward (A,), done (), info).

        `params` (optional, traced): env params for this step (default: the view's `params`).
        """
        act = {a: actions[i] for i, a in enumerate(self.env.agents)}
        obs, state, rew, dones, info = self.env.step(key, state, act, self.params if params is None else params)
        return self.stack(obs), state, self.stack(rew), dones["__all__"], info

    def masks(self, state):
        """Action masks of the learner seats: flat (A, n), or the dict of factored head masks."""
        if self.action_head == "flat":
            return self.stack(self.env.get_avail_actions(state, self.params))
        m = self.env.factored_action_masks(state, self.params)
        if m["type"].shape[0] == self.num_learners:
            return m
        return jax.tree.map(lambda x: x[self.seats], m)

    def learner_info(self, info, key: str) -> jnp.ndarray:
        """An (N,) per-seat info entry restricted to the learner seats (A,)."""
        x = info[key]
        return x if x.shape[0] == self.num_learners else x[self.seats]

    def invalid(self, info) -> jnp.ndarray:
        """The learner seats' invalid flags over a batch of envs: info leaves (E, N) -> (E, A) (the rollout's hook)."""
        return jax.vmap(lambda i: self.learner_info(i, "invalid"))(info)

    def partners(self, actions: jnp.ndarray, types: tuple = ()) -> jnp.ndarray:
        """The learner seat each learner's action addresses: actions (..., A) flat or (..., A, 5) structured ->
        (..., A) int32 learner index, -1 where the action addresses no seat or an NPC's (`spec.partner_types`).
        `types`: names of some of the env's partner types; an action of another type addresses no one (() all)."""
        declared = self.env.spec.partner_types
        if not declared:
            raise ValueError(f"env {type(self.env).__name__} declares no partner_types (no action addresses a seat)")
        unknown = [t for t in types if t not in declared]
        if unknown:
            raise ValueError(f"align_types {unknown} are not partner types of {type(self.env).__name__}: "
                             f"{sorted(declared)}")
        kinds = tuple(declared[t] for t in types) if types else tuple(declared.values())
        rows = self.env.decode(actions) if self.action_head == "flat" else actions
        is_learner = rows[..., 1:2] == self.seats  # (..., A, A): the addressed seat against each learner seat
        addressed = jnp.isin(rows[..., 0], jnp.asarray(kinds, jnp.int32)) & is_learner.any(-1)
        return jnp.where(addressed, jnp.argmax(is_learner, -1), -1).astype(jnp.int32)

    def offers_and_answers(self, actions: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
        """(the learner seat each learner's offer names, the learner seat whose offer each learner's answer names),
        each (..., A) int32 with -1 for none (`spec.offers`: offer types and the types that answer them)."""
        offers = self.env.spec.offers
        if not offers:
            raise ValueError(f"env {type(self.env).__name__} declares no offers (no action answers another)")
        answers = tuple(dict.fromkeys(a for kinds in offers.values() for a in kinds))
        return self.partners(actions, tuple(offers)), self.partners(actions, answers)

    def global_state(self, obs: jnp.ndarray) -> jnp.ndarray:
        """MAPPO critic input: every learner's obs concatenated, the same for each learner (A, A*D)."""
        flat = obs.reshape(obs.shape[:-2] + (-1,))
        return jnp.broadcast_to(flat[..., None, :], obs.shape[:-1] + flat.shape[-1:])


def random_actions(key, masks, action_head: str) -> jnp.ndarray:
    """A uniformly random valid choice per head (factored) or over valid flat actions: the random baseline."""
    if action_head == "flat":
        return masked_categorical(jnp.zeros(masks.shape), masks).sample(seed=key).astype(jnp.int32)
    k = jax.random.split(key, 5)
    pick = lambda m, kk: masked_categorical(jnp.zeros(m.shape), m).sample(seed=kk).astype(jnp.int32)  # noqa: E731
    t = pick(masks["type"], k[0])
    j = pick(_row(masks["target"], t), k[1])
    r = pick(_row(masks["resource"], t), k[2])
    a1 = pick(_row(_row(masks["amount_1"], t), r), k[3])
    a2 = pick(_row(_row(masks["amount_2"], t), r), k[4])
    return jnp.stack([t, j, a1, a2, r], -1)

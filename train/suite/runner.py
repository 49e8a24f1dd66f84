"""The suite's jitted episode runner: every seat's source (heuristic, policy, random) given per cell as data.

A batch of `chunk` cells x `episodes` episodes is one call of one compiled program (the env
params are a traced argument), so every scenario with the same static shape (number of seats)
and every cross-play or snapshot cell reuse one compilation. Every cell of a call plays the
same episode keys (common random numbers), which the paired win rates of the cross-play
ratings rely on. `load_bank` stacks the trained policies of run folders into one bank.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import nexus_jax
import numpy as np
from nexus_jax import rollout
from nexus_jax.cli import UserInputError
from nexus_jax.envs.nexus import NexusEnv, decode, factored_masks, npc_actions, reset, seat_masks, step_all_seats
from train.checkpoint import load_run, param_shapes
from train.learner_env import random_actions
from train.snapshots import load_policies
from train.suite.scenarios import HEURISTIC, POLICY, RANDOM


class AllSeatsEnv(NamedTuple):
    """The functional core with every seat acting (NPC seats' actions come from the act function), the NPC
    memory following `behaviour`, at one cell's traced params: the rollout's protocol (`nexus_jax.rollout`)."""

    params: object
    behaviour: object
    episode_metrics = NexusEnv.episode_metrics

    @property
    def default_params(self):
        return self.params

    def masks(self, state):
        return None  # the act function computes the policy seats' masks itself

    def step(self, keys, state, action, params):
        k_mem, k_step = keys
        return step_all_seats(k_mem, k_step, state, action, self.params, self.behaviour)

    def invalid(self, info):
        return info["invalid"]


class CellOutput(NamedTuple):
    """One call's outputs; leading axes (C cells, E episodes)."""

    returns: object  # (C, E, N) every seat's episode return
    summary: dict  # metrics.summarize of each episode, leaves (C, E, ...)
    trade_matrix: object  # (C, E, N, N) trade volume [proposer, acceptor] summed over the episode
    trace_trust: object  # (C, T, N, N) trust through episode 0
    trace_utility: object  # (C, T, N) utility through episode 0
    trace_shock: object  # (C, T) shock kind active after each step of episode 0 (0 none)


def make_runner(num_agents: int, num_steps: int, episodes: int, policy=None, chunk: int = 8,
                policy_seats: tuple | None = None):
    """-> jitted `run(params, kinds (chunk, N), args (chunk, N), bank, key) -> CellOutput`.

    `policy` is an `ActorCritic` trained with one learner seat on `num_agents` seats (its
    input is the seat's obs plus the agent-id one-hot of size 1); `bank` its params stacked
    on a leading axis (any pytree when `policy` is None). The policy runs for every seat of
    every cell (masked out where the seat's kind is not POLICY), with the params of the
    seat's bank entry gathered once per (cell, seat). A policy with `seat_obs` (the entity
    network) reads each seat's entity view of the state instead of the flat obs, at any N.

    `policy_seats` (static; None: every seat): the only seats that may be POLICY or RANDOM;
    masks and the policy are computed for those alone (at N=64, seat 0 alone is 1/64 of the
    work). `Suite.run_cells` refuses cells that put a policy elsewhere.

    A recurrent policy keeps one memory per (episode, policy seat), leaves (E, S, 1, H), carried by the rollout.
    """
    n = num_agents
    recurrent = policy is not None and bool(policy.memory_size)

    def seat_actions(params, kinds, args, bank, behaviour, key, obs, state, memory=None):
        """(E, N, 5) actions of every seat of one cell (and the policy seats' memories after the step)."""
        k_npc, k_pol, k_rnd = jax.random.split(key, 3)
        heur = jax.vmap(lambda k, s: npc_actions(k, s, params, behaviour))(jax.random.split(k_npc, episodes), state)
        if policy is None:
            return heur
        seats = jnp.arange(n) if policy_seats is None else jnp.asarray(policy_seats, jnp.int32)
        s_n = seats.shape[0]
        flat = jax.vmap(lambda s: seat_masks(s, params, seats))(state)  # (E, S, n_flat)
        fmasks = jax.vmap(lambda f: factored_masks(f, params))(flat)  # leaves (E, S, ...)
        rnd = random_actions(k_rnd, fmasks, "factored")  # (E, S, 5)

        def one_seat(si, k, mem):
            i = seats[si]
            p = jax.tree.map(lambda x: x[jnp.clip(args[i], 0, x.shape[0] - 1)], bank)
            if hasattr(policy, "seat_obs"):
                o = jax.tree.map(lambda x: x[:, None], jax.vmap(lambda s: policy.seat_obs(s, params, i))(state))
            else:
                o = obs[:, i][:, None]
            m = (flat[:, si][:, None] if policy.action_head == "flat"
                 else jax.tree.map(lambda x: x[:, si][:, None], fmasks))
            a, _, _, mem = policy.act_step(p, o, m, k, mem)
            a = a[:, 0]
            return (decode(a, n, params.num_levels) if policy.action_head == "flat" else a), mem

        pol, memory = jax.vmap(one_seat, (0, 0, 1), 1)(jnp.arange(s_n), jax.random.split(k_pol, s_n), memory)
        if policy_seats is not None:  # seats outside policy_seats are never POLICY or RANDOM (run_cells checks)
            pol, rnd = heur.at[:, seats].set(pol), heur.at[:, seats].set(rnd)
        k = kinds[None, :, None]
        actions = jnp.where(k == POLICY, pol, jnp.where(k == RANDOM, rnd, heur)).astype(jnp.int32)
        return actions if memory is None else (actions, memory)

    def split_key(k):
        """A step's key -> (act key, per-episode (memory, step) key pairs)."""
        k_act, k_mem, k_step = jax.random.split(k, 3)
        return k_act, (jax.random.split(k_mem, episodes), jax.random.split(k_step, episodes))

    def cell(params, kinds, args, bank, key):
        base = getattr(params, "behaviours", None)  # the scenario's NPC behaviour per seat (default: archetypes)
        behaviour = jnp.where(kinds == HEURISTIC, args, params.archetypes if base is None else base)
        env = AllSeatsEnv(params, behaviour)
        k_reset, k_run = jax.random.split(key)
        obs, state = jax.vmap(lambda k: reset(k, params))(jax.random.split(k_reset, episodes))

        def act(k, obs, state, _):
            return seat_actions(params, kinds, args, bank, behaviour, k, obs, state), None

        def act_recurrent(k, obs, state, _, memory):
            actions, memory = seat_actions(params, kinds, args, bank, behaviour, k, obs, state, memory)
            return actions, None, memory

        def memory0(num_episodes):
            seats = n if policy_seats is None else len(policy_seats)
            return jax.tree.map(lambda z: jnp.zeros((num_episodes, seats, 1, z.shape[-1])), policy.initial_memory(1))

        def fold(tm, s):
            return tm + s.info["stats"]["trade_volume"]

        def trace(s):
            nxt = s.next_state
            return nxt.trust[0], s.info["utility"][0], jnp.where(nxt.shock_remaining[0] > 0, nxt.shock_kind[0], 0)

        acts = rollout.Recurrent(act_recurrent, memory0) if recurrent else act
        ep = rollout.evaluate_from(env, acts, obs, state, jax.random.split(k_run, num_steps), split_key, params,
                                   metrics=True, fold=fold, fold0=jnp.zeros((episodes, n, n)), trace=trace)
        tr_trust, tr_util, tr_shock = ep.trace
        return CellOutput(ep.metrics["returns"], ep.metrics, ep.extra, tr_trust, tr_util, tr_shock)

    def run(params, kinds, args, bank, key):
        return jax.vmap(cell, in_axes=(None, 0, 0, None, None))(params, kinds, args, bank, key)

    return jax.jit(run)


class Suite:
    """Runs cells through cached compiled runners (one per number of seats), `chunk` cells per call."""

    def __init__(self, policy=None, bank=None, policy_agents: int | None = None, episodes: int = 32,
                 chunk: int = 8, seed: int = 0, policy_seats: tuple | None = None):
        self.policy, self.bank, self.policy_agents = policy, bank, policy_agents
        self.episodes, self.chunk, self.seed = episodes, chunk, seed
        self.policy_seats = None if policy_seats is None else tuple(int(i) for i in policy_seats)
        self._runners: dict = {}

    def fits(self, num_agents: int) -> bool:
        """Can the policy play at this number of seats? A flat-obs policy only at its training N; an
        entity-view policy (one with `seat_obs`) at any N."""
        if self.policy is None:
            return False
        return num_agents == self.policy_agents or hasattr(self.policy, "seat_obs")

    def runner(self, num_agents: int, num_steps: int):
        key = (num_agents, num_steps, self.fits(num_agents))
        if key not in self._runners:
            self._runners[key] = make_runner(num_agents, num_steps, self.episodes,
                                             self.policy if self.fits(num_agents) else None, self.chunk,
                                             self.policy_seats)
        return self._runners[key]

    def run_cells(self, params, cells: list[tuple[list[int], list[int]]], seed: int | None = None) -> dict:
        """cells: [(kinds (N,), args (N,))] -> dict of numpy arrays with a leading cell axis."""
        n = params.num_agents
        if self.policy_seats is not None:
            for kinds, _ in cells:
                bad = [i for i, k in enumerate(kinds) if k in (POLICY, RANDOM) and i not in self.policy_seats]
                if bad:
                    raise ValueError(f"Suite(policy_seats={self.policy_seats}): a cell puts a policy or random "
                                     f"player in seat(s) {bad}")
        steps = int(np.asarray(params.max_steps))
        run = self.runner(n, steps)
        bank = self.bank if self.fits(n) else jnp.zeros((1,))
        key = jax.random.PRNGKey(self.seed if seed is None else seed)
        outs = []
        for start in range(0, len(cells), self.chunk):
            part = cells[start:start + self.chunk]
            pad = part + [part[-1]] * (self.chunk - len(part))
            kinds = jnp.asarray([c[0] for c in pad], jnp.int32)
            args = jnp.asarray([c[1] for c in pad], jnp.int32)
            out = jax.device_get(run(params, kinds, args, bank, key))
            outs.append(jax.tree.map(lambda x: np.asarray(x)[:len(part)], out))
        return jax.tree.map(lambda *xs: np.concatenate(xs, 0), *outs)


class Bank(NamedTuple):
    names: list  # entry names, in bank order
    params: object  # pytree, leaves stacked (K, ...)
    seeds: list  # bank indices of each seed's final params
    snapshots: dict  # seed -> [(update, env_steps, bank index)] in training order


def load_bank(run_dirs) -> tuple:
    """-> (cfg, policy, Bank) of one or more run folders (same network shape); names are prefixed by run."""
    run_dirs = [run_dirs] if isinstance(run_dirs, (str, bytes)) or hasattr(run_dirs, "parts") else list(run_dirs)
    names, params, seeds, snaps = [], [], [], {}
    cfg0 = policy0 = None
    for r, run_dir in enumerate(run_dirs):
        cfg, env, policy, kept = load_run(run_dir)
        if policy.num_learners != 1 and not hasattr(policy, "seat_obs"):  # an entity policy plays any one seat
            raise UserInputError(f"{run_dir}: the suite plays single-learner policies (got {policy.num_learners} learner "
                             f"seats, e.g. a nexus-selfplay-v0 run); see docs/evaluation.md")
        if cfg0 is None:
            cfg0, policy0 = cfg, policy
        pre = "" if len(run_dirs) == 1 else f"{cfg.name}/"
        pol = load_policies(run_dir, param_shapes(cfg, env, policy))
        if not pol["seeds"]:  # a run from before seeds/ existed: its kept checkpoint stands for seed 0
            pol["seeds"] = [kept]
        for s, p in enumerate(pol["seeds"]):
            seeds.append(len(names))
            names.append(f"{pre}seed{s}")
            params.append(p)
        for s, u, steps, p in pol["snapshots"]:
            snaps.setdefault(f"{pre}seed{s}", []).append((u, steps, len(names)))
            names.append(f"{pre}seed{s}@u{u}")
            params.append(p)
    stacked = jax.tree.map(lambda *xs: np.stack(xs), *params)
    return cfg0, policy0, Bank(names, stacked, seeds, snaps)


def make_suite(cfg, policy, bank: Bank, episodes: int = 32, chunk: int = 8, seed: int = 0,
               policy_seats: tuple | None = None) -> Suite:
    n = nexus_jax.make(cfg.env_id, **cfg.env).default_params.num_agents
    return Suite(policy, bank.params, n, episodes, chunk, seed, policy_seats)

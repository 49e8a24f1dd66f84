"""Merge external (learner) actions with NPC actions and step the core: the one place seats are composed."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from nexus_jax.envs.nexus import noise
from nexus_jax.envs.nexus import actions as A
from nexus_jax.envs.nexus import core
from nexus_jax.envs.nexus.arith import materialize
from nexus_jax.envs.nexus.npc.memory import update_npc_memory
from nexus_jax.envs.nexus.npc.policy import npc_actions


def step_with_npcs(key, state, external, params, learner_seats, behaviour=None, obs_seats=None, reset_state=None):
    """Step with `external` actions ((L,) flat or (L, 5)) for `learner_seats` (a static tuple) and NPCs elsewhere.

    Returns core.step's (obs, state, rewards, done, info) over all N seats; info gains
    `rewards_all` (N,), every seat's reward, and `shock_active` (). With every seat a learner
    this is exactly `core.step(key, ...)` (no NPC work, same key use). `behaviour` (N,)
    overrides which archetype plays each seat's NPC policy; default `params.behaviours`.
    `obs_seats` (static) observes only those seats, as in `core.step`.
    """
    n = params.num_agents
    behaviour = params.behaviours if behaviour is None else behaviour
    ext = jnp.asarray(external, jnp.int32)
    if learner_seats is None or tuple(learner_seats) == tuple(range(n)):
        obs, stepped, rew, done, info = core.step(key, state, ext, params, obs_seats)
        return obs, written_once(state, stepped, done, reset_state), rew, done, _extra(info, stepped, rew)
    k_npc, k_mem, k_step = noise.split(key, 3)
    acts = npc_actions(k_npc, state, params, behaviour)
    if ext.ndim == 1:  # merge in the flat space, so an out-of-range learner index stays BAD_INDEX
        acts = A.encode(acts, n, params.num_levels)
    if len(learner_seats):
        acts = acts.at[jnp.asarray(learner_seats)].set(ext)
    return step_all_seats(k_mem, k_step, state, acts, params, behaviour, obs_seats, reset_state)


def step_all_seats(key_memory, key_step, state, actions, params, behaviour=None, obs_seats=None, reset_state=None):
    """core.step with every seat's `actions` given ((N,) flat or (N, 5)), the NPC memory kept as `step_with_npcs` does.

    For evaluators that choose each seat's source themselves (a heuristic, a policy, random)
    and still want the NPC memory of `behaviour` (N,) (default `params.behaviours`) to follow
    the episode. Returns what `step_with_npcs` returns.
    """
    behaviour = params.behaviours if behaviour is None else behaviour
    obs, stepped, rew, done, info = core.step(key_step, state, actions, params, obs_seats)
    new = written_once(state, stepped, done, reset_state)
    memory = update_npc_memory(state, new, info, params, key_memory, behaviour)  # read only where not done
    if reset_state is not None:
        memory = jax.lax.select(done, reset_state.npc_memory, memory)
    return obs, new.replace(npc_memory=memory), rew, done, _extra(info, stepped, rew)


def written_once(prev, new, done=None, reset_state=None):
    """`new` with every field the step wrote stored once (`arith.materialize`); fields it left alone pass through.

    The env class reads the stepped state in several places (the NPC memory update, the
    auto-reset select, the observation of the selected state). Without this, XLA:CPU fused
    the computation of each field (the validity check, settle, commit, the ledger append)
    into every one of those kernels: the auto-reset made `env.step` 1.47x slower
    (docs/performance.md).

    With `reset_state` (the auto-reset's fresh episode), each leaf is `reset_state`'s where `done`
    and the stored value is the selected one: one stored table per leaf instead of the stepped
    table stored and then selected in a kernel of its own (env.step 1.07x paired).
    """
    if reset_state is None:
        return jax.tree.map(lambda n, p: p if n is p else materialize(n), new, prev)
    def selected(r, n, p):
        chosen = jax.lax.select(done, r, n)
        return chosen if n is p else materialize(chosen)
    return jax.tree.map(selected, reset_state, new, prev)


def _extra(info, new, rew):
    """What the log wrappers need besides core.step's info: every seat's reward, the shock state after the step."""
    return {**info, "rewards_all": rew, "shock_active": new.shock_remaining > 0}

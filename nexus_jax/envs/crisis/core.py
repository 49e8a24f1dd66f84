"""The functional core of crisis-v0: pure `reset(key, params)` and `step(key, state, actions, params)`.

Arrays are stacked over all A seats; actions are flat indices; no auto-reset (the env class
adds it, as for nexus-v0). `step` runs, in order: validate actions -> release -> intent
broadcast -> emergency charter -> market bargaining -> coalition contracting -> promise
settlement -> belief updates -> task progress -> deadlines -> crises for the next step ->
reward, metrics, obs. This is the source of truth for the rules.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from nexus_jax.envs.crisis import crises, negotiation as nego
from nexus_jax.envs.crisis.constants import NUM_OUTCOMES, Outcome
from nexus_jax.envs.crisis.observation import get_obs
from nexus_jax.envs.crisis.reward import (combine, individual_reward, jain, task_stats, team_reward,
                                          team_score)
from nexus_jax.envs.crisis.state import Counters, CrisisState
from nexus_jax.envs.crisis.tasks import generate_task_set, params_task_set


def crisis_phase(state: CrisisState, params) -> CrisisState:
    """Bring capacity and urgent tasks to `state.step`; preempt running tasks that no longer fit.

    Preemption keeps the most urgent running tasks (greedy, by hours to deadline) and frees the
    rest; their progress is kept. Afterwards the capacity invariant used <= capacity holds.
    """
    A, K = state.done.shape
    cap = crises.capacity_at(state.schedule, state.step, state.level, params)
    now = nego.now_hours(state.step, params)
    inject = crises.urgent_due(state.schedule, state.step) & ~state.urgent_fired
    new_urgent = inject & state.tasks.urgent & state.tasks.exists
    tasks = state.tasks.replace(deadline_h=jnp.where(new_urgent, now + state.tasks.deadline_h, state.tasks.deadline_h))
    state = state.replace(capacity=cap, tasks=tasks, released=state.released | new_urgent,
                          urgent_fired=state.urgent_fired | inject)
    holding = state.running_slot >= 0
    left_h = tasks.deadline_h[jnp.arange(A), jnp.maximum(state.running_slot, 0)] - now
    keep = crises.greedy_fit(jnp.argsort(left_h, stable=True), nego.running_demand(state), holding, cap)
    preempted = holding & ~keep
    return state.replace(running_slot=jnp.where(preempted, -1, state.running_slot),
                         last_outcome=state.last_outcome.at[:, Outcome.PREEMPTED].set(preempted))


def reset(key, params):
    """-> (obs (A, D), state): a fresh episode (task set and crisis schedule drawn from `key`)."""
    A, K = params.num_agents, params.max_tasks
    k_tasks, k_crises = jax.random.split(key)
    level = jnp.asarray(params.curriculum_level, jnp.int32)
    fixed, rand = params_task_set(params), generate_task_set(k_tasks, params)
    # task_default_prob: a reset of a random-source env may use the fixed set (its own draw: the others are unchanged)
    use_rand = (params.task_source == 1) & (jax.random.uniform(jax.random.fold_in(k_tasks, 1)) >= params.task_default_prob)
    tasks = jax.tree.map(lambda r, f: jnp.where(use_rand, r, f), rand, fixed)
    slack = params.level_deadline_slack_h[level]
    tasks = tasks.replace(deadline_h=jnp.where(tasks.exists, tasks.deadline_h + slack, 0.0).astype(jnp.float32),
                          cores=tasks.cores.astype(jnp.float32), ram=tasks.ram.astype(jnp.float32),
                          gpu=tasks.gpu.astype(jnp.float32), duration_min=tasks.duration_min.astype(jnp.float32))
    zA = jnp.zeros(A, jnp.int32)
    state = CrisisState(
        step=jnp.int32(0), level=level, tasks=tasks,
        released=tasks.exists & ~tasks.urgent,
        progress_min=jnp.zeros((A, K)), done=jnp.zeros((A, K), bool), completed_h=jnp.zeros((A, K)),
        missed=jnp.zeros((A, K), bool), running_slot=jnp.full(A, -1, jnp.int32), capacity=jnp.zeros(3),
        schedule=crises.make_schedule(k_crises, params, level), urgent_fired=jnp.bool_(False),
        trust=jnp.full((A, A), params.trust_init, jnp.float32),
        contract_open=jnp.zeros((A, A), bool), contract_age=jnp.zeros((A, A), jnp.int32),
        beliefs=jnp.broadcast_to(params.belief_init.astype(jnp.float32), (A, A, 4)),
        last_requested=jnp.zeros(A, bool), last_demand=jnp.zeros((A, 3)), last_yielded=jnp.zeros(A, bool),
        last_error=zA, last_outcome=jnp.zeros((A, NUM_OUTCOMES), bool), last_belief_accuracy=jnp.zeros(A),
        team_score=jnp.float32(0.0),
        counters=Counters(invalid=zA, waiting_steps=zA, missed=zA, contracts_made=jnp.int32(0),
                          contracts_honoured=jnp.int32(0), contracts_broken=jnp.int32(0),
                          contracts_expired=jnp.int32(0), belief_accuracy_sum=jnp.float32(0.0),
                          charter_steps=jnp.int32(0), conflict_steps=jnp.int32(0)),
    )
    state = crisis_phase(state, params)
    state = state.replace(team_score=team_score(state, params).astype(jnp.float32))
    return get_obs(state, params), state


def step(key, state, actions, params):
    """-> (obs (A, D), state, rewards (A,), done, info): one step of every seat, no auto-reset.

    `actions`: (A,) or (A, 1) integer flat indices. `info` has every metric (the env class
    reduces it to per-seat entries in info_mode "agents").
    """
    del key  # the dynamics are deterministic given the state; randomness lives in reset
    A, K = state.done.shape
    actions = jnp.asarray(actions)
    if actions.shape not in ((A,), (A, 1)) or not jnp.issubdtype(actions.dtype, jnp.integer):
        raise ValueError(f"crisis-v0 step: actions must be integer flat indices of shape ({A},) or ({A}, 1); "
                         f"got shape {actions.shape} and dtype {actions.dtype}")
    actions = actions.astype(jnp.int32).reshape(A)
    prior_open = state.contract_open

    intents = nego.validate(state, actions, params)
    state = nego.release_phase(state, intents)
    intents = nego.intent_broadcast(state, intents, params)
    charter = nego.emergency_charter(state, intents, params)
    state, market = nego.market_bargaining(state, intents, charter, params)
    state, new_contracts = nego.coalition_contracting(state, market, params)
    state, settlement = nego.promise_settlement(state, prior_open, intents, market, params)
    state, accuracy = nego.belief_update(state, intents, params)

    # Waiting: no task holding resources while some task is ready to run.
    waiting = (state.running_slot < 0) & jnp.any(nego.ready(state), axis=1)

    # Task progress: running tasks get one step of allocated time.
    running = state.running_slot[:, None] == jnp.arange(K)[None, :]
    progress = state.progress_min + jnp.where(running, params.minutes_per_step, 0.0)
    completed = running & (progress >= state.tasks.duration_min - 1e-6)
    next_step = state.step + 1
    now_next = nego.now_hours(next_step, params)
    state = state.replace(
        progress_min=progress, done=state.done | completed,
        completed_h=jnp.where(completed, now_next, state.completed_h),
        running_slot=jnp.where(jnp.any(completed, 1), -1, state.running_slot),
    )
    # Deadlines: a released task whose deadline passed undone is missed (penalised once).
    newly_missed = (state.tasks.exists & state.released & ~state.done & ~state.missed
                    & (state.tasks.deadline_h < now_next - 1e-6))
    state = state.replace(missed=state.missed | newly_missed)

    outcome = jnp.zeros((A, NUM_OUTCOMES), bool)
    outcome = outcome.at[:, Outcome.ALLOCATED].set(market.granted).at[:, Outcome.DENIED].set(market.denied)
    outcome = outcome.at[:, Outcome.YIELDED].set(market.yielded).at[:, Outcome.CHARTER].set(charter)
    outcome = outcome.at[:, Outcome.COMPLETED].set(jnp.any(completed, 1))
    outcome = outcome.at[:, Outcome.CONTRACT_HONOURED].set(jnp.any(settlement.honoured, 1))
    outcome = outcome.at[:, Outcome.CONTRACT_BROKEN].set(jnp.any(settlement.broken, 1))
    state = state.replace(step=next_step, last_requested=intents.requested, last_demand=intents.demand,
                          last_yielded=market.yielded, last_error=intents.error, last_outcome=outcome,
                          last_belief_accuracy=accuracy)

    # Crises for the next step (capacity, urgent injection, preemption).
    state = crisis_phase(state, params)

    # Reward.
    broken_now = jnp.sum(settlement.broken)
    score = team_score(state, params)
    ind = individual_reward(completed, state, waiting, newly_missed, intents.invalid, params)
    team = team_reward(state.team_score, score, broken_now, params)
    rewards = combine(ind, team, params).astype(jnp.float32)

    c = state.counters
    mean_acc = jnp.mean(accuracy)
    counters = c.replace(
        invalid=c.invalid + intents.invalid, waiting_steps=c.waiting_steps + waiting,
        missed=c.missed + jnp.sum(newly_missed, 1), contracts_made=c.contracts_made + jnp.sum(new_contracts),
        contracts_honoured=c.contracts_honoured + jnp.sum(settlement.honoured),
        contracts_broken=c.contracts_broken + broken_now,
        contracts_expired=c.contracts_expired + jnp.sum(settlement.expired),
        belief_accuracy_sum=c.belief_accuracy_sum + mean_acc,
        charter_steps=c.charter_steps + jnp.any(charter), conflict_steps=c.conflict_steps + market.contention,
    )
    state = state.replace(team_score=score.astype(jnp.float32), counters=counters)
    done = state.step >= crises.num_steps(params)
    info = metrics(state, params)
    info.update(individual_reward=ind.astype(jnp.float32), team_reward=team.astype(jnp.float32),
                belief_accuracy=mean_acc, invalid_actions=jnp.sum(intents.invalid), invalid=intents.invalid,
                contention=market.contention, charter=jnp.any(charter),
                contracts_made_step=jnp.sum(new_contracts), contracts_broken_step=broken_now,
                error_code=intents.error)
    return get_obs(state, params), state, rewards, done, info


EPISODE_METRICS = ("completion_rate", "on_time_rate", "fairness", "seat_completion_rate", "belief_accuracy_mean",
                   "contracts_made", "contracts_honoured", "contracts_broken", "contracts_expired", "invalid_total",
                   "missed_deadlines")  # what `episode_metrics` keeps of `metrics` (the rest describes one step)


def episode_init(state: CrisisState, params) -> dict:
    """`metrics` of `state` (an episode's start), the keys of EPISODE_METRICS."""
    m = metrics(state, params)
    return {k: m[k] for k in EPISODE_METRICS}


def episode_update(acc: dict, state: CrisisState, info: dict, params) -> dict:
    """The episode-so-far metrics the step's full info carries (`step` computes `metrics` after the step)."""
    missing = [k for k in acc if k not in info]
    if missing:
        raise ValueError(f"crisis-v0 episode metrics read the step's full info: make the env with info_mode='full' "
                         f"(missing {missing})")
    return {k: info[k] for k in acc}


def metrics(state: CrisisState, params) -> dict:
    """Episode-so-far metrics (the seed's table: completion, on time, fairness, belief accuracy, contracts)."""
    total, done, on_time, per_rate, has = task_stats(state)
    denom = jnp.maximum(total, 1)
    c = state.counters
    return {
        "completion_rate": (done / denom).astype(jnp.float32),
        "on_time_rate": (on_time / denom).astype(jnp.float32),
        "fairness": jain(per_rate, has).astype(jnp.float32),
        "seat_completion_rate": per_rate.astype(jnp.float32),
        "belief_accuracy_mean": (c.belief_accuracy_sum / jnp.maximum(state.step, 1)).astype(jnp.float32),
        "contracts_made": c.contracts_made, "contracts_honoured": c.contracts_honoured,
        "contracts_broken": c.contracts_broken, "contracts_expired": c.contracts_expired,
        "invalid_total": jnp.sum(c.invalid), "missed_deadlines": jnp.sum(c.missed),
        "used": nego.used(state), "capacity": state.capacity, "level": state.level,
    }

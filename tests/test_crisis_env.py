"""crisis-v0 dynamics: hand-built states and one random rollout through the same two compilations.

Every test goes through `reset` (vmapped reset_env) and `stepper` (vmapped step_env with
in-graph random actions), both compiled once per module at batch size B: hand-built states
are tiled to B copies and element 0 is read back. So every curriculum level, task source and
crisis source shares one compiled step (the no-retracing and traced-level checks).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nexus_jax
from nexus_jax.envs.crisis import negotiation as nego
from nexus_jax.envs.crisis.constants import GPU, NUM_ERRORS, Base, Error, Nego, Outcome
from nexus_jax.envs.crisis.negotiation import encode
from nexus_jax.envs.crisis.observation import GLOBAL_FEATURES, PEER_FEATURES, TASK_FEATURES
from nexus_jax.envs.crisis.params import CrisisParams

B = 40  # batch: 5 levels x fixed/random task sets x scheduled/random crises x 2 keys
STEPS = 48  # 8 h at 10 min per step
SAMPLE = -2  # action sentinel: the stepper samples (80% a masked-valid action, 20% any index)
TRACES = {"step": 0, "reset": 0}
WAIT = encode(Base.WAIT, Nego.HOLD)


def req(slot, nego_choice=Nego.HOLD):
    return encode(Base.REQUEST, nego_choice, slot=slot)


def params_at(level, **kw):
    return CrisisParams.create(curriculum_level=level, **kw)


def tile(tree):
    return jax.tree.map(lambda x: jnp.broadcast_to(jnp.asarray(x)[None], (B,) + jnp.shape(x)), tree)


def first(tree):
    return jax.tree.map(lambda x: x[0], tree)


@pytest.fixture(scope="module")
def env():
    return nexus_jax.make("crisis-v0", info_mode="full")


@pytest.fixture(scope="module")
def reset(env):
    def f(key, params):
        TRACES["reset"] += 1
        return env.reset_env(key, params)
    return jax.jit(jax.vmap(f))


@pytest.fixture(scope="module")
def stepper(env):
    n = env.num_actions

    def f(key, state, actions, params):
        TRACES["step"] += 1
        mask = env.avail_actions_array(state, params)
        u = jax.random.uniform(key, (mask.shape[0], n + 2), minval=1e-6, maxval=1.0)  # one PRNG call
        masked = jnp.argmax(jnp.where(mask, -jnp.log(-jnp.log(u[:, :n])), -jnp.inf), axis=1)  # Gumbel-max
        wild = jnp.floor(u[:, n] * (n + 2)).astype(jnp.int32) - 1  # any index in -1..n (some out of range)
        sampled = jnp.where(u[:, n + 1] < 0.2, wild, masked.astype(jnp.int32))
        a = jnp.where(actions == SAMPLE, sampled, actions)
        obs, nxt, r, done, info = env.step_env(key, state, a, params)
        return obs, nxt, r, done, info, a, mask, nego.ready(state)
    return jax.jit(jax.vmap(f))


def start(reset, params, seed=0):
    """A single env state (element 0 of a tiled reset)."""
    obs, s = reset(jax.random.split(jax.random.PRNGKey(seed), B), tile(params))
    return first(obs), first(s)


def one_step(stepper, state, actions, params, seed=1):
    """Step one hand-built state: (obs, state, reward, done, info, actions, mask, ready_before)."""
    out = stepper(jax.random.split(jax.random.PRNGKey(seed), B), tile(state), tile(jnp.asarray(actions, jnp.int32)),
                  tile(params))
    return first(out)


def batch_params(num):
    """Params stacked over a batch: levels 0..4, fixed/random task sets, scheduled/random crises."""
    ps = [params_at(i % 5, task_source=(i // 5) % 2, crisis_source=(i // 10) % 2) for i in range(num)]
    return jax.tree.map(lambda *x: jnp.stack(x), *ps)


def run_rollout(reset, stepper, params, keys):
    """Random-action episode over the batch; returns (final state, per-step records as numpy)."""
    _, state = reset(keys, params)
    recs = []
    step_keys = jax.vmap(lambda k: jax.random.split(k, STEPS))(keys)
    for t in range(STEPS):
        obs, nxt, r, done, info, a, mask, _ = stepper(step_keys[:, t], state, jnp.full((B, 3), SAMPLE, jnp.int32), params)
        recs.append(dict(used=jax.vmap(nego.used)(nxt), capacity=nxt.capacity, reward=r, done=done, trust=nxt.trust,
                         progress=nxt.progress_min, invalid=info["invalid_actions"], contention=info["contention"],
                         belief=info["belief_accuracy"], obs=obs, actions=a, mask=mask,
                         error=nxt.last_error))
        state = nxt
    traj = {k: np.stack([np.asarray(r[k]) for r in recs], 1) for k in recs[0]}
    return state, traj


@pytest.fixture(scope="module")
def batch():
    return batch_params(B), jax.random.split(jax.random.PRNGKey(0), B)


@pytest.fixture(scope="module")
def rolled(reset, stepper, batch):
    params, keys = batch
    return run_rollout(reset, stepper, params, keys)


# ---- hand-built states -------------------------------------------------------------------------

def test_dependencies_gate_readiness(reset, stepper):
    p = params_at(4)
    _, s = start(reset, p)
    ready = lambda st: np.asarray(one_step(stepper, st, [WAIT, WAIT, WAIT], p)[7])  # noqa: E731
    r = ready(s)
    np.testing.assert_array_equal(r[0], [True, True, True, False])  # loads ready; urgent not yet released
    assert not r[1].any() and not r[2].any()  # cleans wait for loads, trains for cleans
    s = s.replace(done=s.done.at[0, 0].set(True))
    r = ready(s)
    assert r[1, 0] and not r[1, 1] and not r[1, 2] and not r[0, 0]
    s = s.replace(done=s.done.at[1, 0].set(True))
    assert not ready(s)[2, 0]  # train_baseline needs clean 1 AND clean 2
    s = s.replace(done=s.done.at[1, 1].set(True))
    r = ready(s)
    assert r[2, 0] and not r[2, 1] and not r[2, 2]
    # The mask offers exactly the ready slots (nothing running, all fit the cluster).
    mask = np.asarray(one_step(stepper, s, [WAIT, WAIT, WAIT], p)[6])
    np.testing.assert_array_equal(mask[:, 4::2], r)


def test_completion_reward_on_time_and_late(reset, stepper):
    p = params_at(4)
    _, s = start(reset, p)
    # Seat 0 runs load_raw_batch_1 (45 min, due 2.0 h) with 40 min done: it finishes at step 6 = 1.0 h.
    s0 = s.replace(step=jnp.int32(5), running_slot=s.running_slot.at[0].set(0),
                   progress_min=s.progress_min.at[0, 0].set(40.0))
    _, s1, _, _, info, *_ = one_step(stepper, s0, jnp.array([WAIT, WAIT, WAIT]), p)
    assert bool(s1.done[0, 0]) and float(s1.completed_h[0, 0]) == pytest.approx(1.0)
    assert float(info["individual_reward"][0]) == pytest.approx(12.0 + 1.5 * 1.0 + 2.0)  # base + early + on time
    assert int(s1.running_slot[0]) == -1 and bool(s1.last_outcome[0, Outcome.COMPLETED])
    # Same task finishing at 2.5 h, half an hour late (its miss already penalised earlier).
    s0 = s0.replace(step=jnp.int32(14), missed=s0.missed.at[0, 0].set(True))
    _, s1, _, _, info, *_ = one_step(stepper, s0, jnp.array([WAIT, WAIT, WAIT]), p)
    assert float(info["individual_reward"][0]) == pytest.approx(max(0.0, 10.0 - 1.5 * 0.5) - 0.5)


def test_missed_deadline_penalised_once(reset, stepper):
    p = params_at(4)
    _, s = start(reset, p)
    # clean_batch_1 is due 3.5 h; its load is not done, so the cleaner has nothing ready (no waiting).
    s0 = s.replace(step=jnp.int32(21))  # this step ends at 22 x 10 min = 3.67 h
    _, s1, _, _, info, *_ = one_step(stepper, s0, jnp.array([WAIT, WAIT, WAIT]), p)
    assert bool(s1.missed[1, 0]) and not bool(s1.missed[1, 1])
    assert float(info["individual_reward"][1]) == pytest.approx(-3.0)
    _, s2, _, _, info, *_ = one_step(stepper, s1, jnp.array([WAIT, WAIT, WAIT]), p)
    assert float(info["individual_reward"][1]) == pytest.approx(0.0)  # not again
    assert int(s2.counters.missed[1]) == 1


def test_waiting_penalty_when_ready_work_is_idle(reset, stepper):
    p = params_at(4)
    _, s = start(reset, p)
    _, _, _, _, info, *_ = one_step(stepper, s, jnp.array([WAIT, WAIT, WAIT]), p)
    ind = np.asarray(info["individual_reward"])
    assert ind[0] == pytest.approx(-0.2) and ind[1] == 0.0 and ind[2] == 0.0  # only the loader has ready work


def test_invalid_actions_are_counted_noops_with_error_in_next_obs(env, reset, stepper):
    p = params_at(4)
    obs0, s = start(reset, p)
    acts = jnp.array([99, encode(Base.RELEASE), req(0)])  # out of range; nothing to release; clean 1 not ready
    obs, s1, _, _, info, *_ = one_step(stepper, s, acts, p)
    assert int(info["invalid_actions"]) == 3
    np.testing.assert_array_equal(np.asarray(s1.last_error),
                                  [Error.OUT_OF_RANGE, Error.NOTHING_TO_RELEASE, Error.TASK_NOT_READY])
    np.testing.assert_array_equal(np.asarray(s1.running_slot), [-1, -1, -1])
    np.testing.assert_array_equal(np.asarray(s1.progress_min), np.asarray(s.progress_min))
    ind = np.asarray(info["individual_reward"])
    assert ind[1] == pytest.approx(-1.0) and ind[0] == pytest.approx(-1.0 - 0.2)
    off = GLOBAL_FEATURES + 3 + 4 * TASK_FEATURES + 2 * PEER_FEATURES
    np.testing.assert_array_equal(np.asarray(obs)[:, off:off + NUM_ERRORS].argmax(1), np.asarray(s1.last_error))
    # A request the mask forbids becomes an error too: masks and validation agree.
    mask = np.asarray(env.avail_actions_array(s, p))
    assert mask[0, req(0)] and not mask[1, req(0)] and not mask[0, encode(Base.RELEASE)]


def test_gpu_outage_blocks_and_preempts_gpu_tasks(env, reset, stepper):
    p = params_at(3)  # outage 3:00-4:00 (steps 18..23)
    _, s = start(reset, p)
    done = s.done.at[0, :3].set(True).at[1, :3].set(True)
    s0 = s.replace(step=jnp.int32(17), done=done, running_slot=s.running_slot.at[2].set(0),
                   progress_min=s.progress_min.at[2, 0].set(30.0))
    _, s1, _, _, info, *_ = one_step(stepper, s0, jnp.array([WAIT, WAIT, WAIT]), p)
    assert float(s1.capacity[GPU]) == 0.0 and float(nego.used(s1)[GPU]) == 0.0
    assert int(s1.running_slot[2]) == -1 and bool(s1.last_outcome[2, Outcome.PREEMPTED])
    assert float(s1.progress_min[2, 0]) == 40.0  # progress kept
    mask = np.asarray(env.avail_actions_array(s1, p))
    assert not mask[2, req(0)] and not mask[2, req(1, Nego.YIELD)]
    _, s2, _, _, info, *_ = one_step(stepper, s1, jnp.array([WAIT, WAIT, req(0)]), p)
    assert int(s2.last_error[2]) == Error.EXCEEDS_CAPACITY and int(s2.running_slot[2]) == -1
    assert float(s2.progress_min[2, 0]) == 40.0
    # Before the outage (and at level 2, where it is disabled) the same request runs.
    p2 = params_at(2)
    _, s3, _, _, _, *_ = one_step(stepper, s1.replace(level=jnp.int32(2), capacity=jnp.array([16.0, 32.0, 1.0])),
                          jnp.array([WAIT, WAIT, req(0)]), p2)
    assert int(s3.last_error[2]) == Error.NONE and bool(s3.last_outcome[2, Outcome.ALLOCATED])


def _contract_state(reset, p):
    """Seat 0 asks for load 3 (2 cores), seat 1 for clean 1 (4 cores); only 4 cores free: contention."""
    _, s = start(reset, p)
    return s.replace(done=s.done.at[0, 0].set(True), capacity=jnp.array([4.0, 32.0, 1.0]))


@pytest.mark.parametrize("debtor_yields", [True, False])
def test_contracts_settle_and_move_trust(reset, stepper, debtor_yields):
    p = params_at(4)
    s = _contract_state(reset, p)
    _, s1, _, _, info, *_ = one_step(stepper, s, jnp.array([req(2, Nego.YIELD), req(0), WAIT]), p)
    assert bool(info["contention"]) and int(info["contracts_made_step"]) == 1
    assert bool(s1.last_outcome[0, Outcome.YIELDED]) and bool(s1.last_outcome[1, Outcome.ALLOCATED])
    assert bool(s1.contract_open[0, 1]) and int(s1.contract_open.sum()) == 1
    np.testing.assert_allclose(np.asarray(s1.trust), 0.5)  # a new contract moves no trust
    # Later step, same conflict; now the debtor (seat 1) yields or holds.
    # (progress reset so seat 1's request is again the more urgent: seat 0 is the one denied)
    s1b = s1.replace(running_slot=jnp.array([-1, -1, -1]), capacity=jnp.array([4.0, 32.0, 1.0]),
                     progress_min=jnp.zeros_like(s1.progress_min))
    choice = Nego.YIELD if debtor_yields else Nego.HOLD
    _, s2, _, _, info, *_ = one_step(stepper, s1b, jnp.array([req(2), req(0, choice), WAIT]), p)
    assert not bool(s2.contract_open[0, 1])
    if debtor_yields:
        assert float(s2.trust[0, 1]) == pytest.approx(0.5 + 0.2 * 0.5)
        assert int(s2.counters.contracts_honoured) == 1 and int(s2.counters.contracts_broken) == 0
        assert bool(s2.last_outcome[0, Outcome.CONTRACT_HONOURED])
    else:
        assert bool(s2.last_outcome[0, Outcome.DENIED])
        assert float(s2.trust[0, 1]) == pytest.approx(0.5 - 0.3 * 0.5)
        assert float(s2.trust[2, 1]) == pytest.approx(0.5 - 0.05 * 0.5)  # public reputation hit
        assert int(info["contracts_broken_step"]) == 1 and int(s2.counters.contracts_broken) == 1
        assert bool(s2.last_outcome[0, Outcome.CONTRACT_BROKEN])
    assert float(s2.trust[1, 0]) == pytest.approx(0.5)  # only the creditor's view of the debtor moves


def test_no_negotiation_at_level_zero(reset, stepper):
    p = params_at(0)
    s = _contract_state(reset, p)
    _, s1, _, _, info, *_ = one_step(stepper, s, jnp.array([req(2, Nego.YIELD), req(0), WAIT]), p)
    assert bool(info["contention"]) and int(info["contracts_made_step"]) == 0
    assert not bool(s1.last_outcome[0, Outcome.YIELDED])  # the yield choice is inert
    assert int(s1.contract_open.sum()) == 0


def test_capacity_never_exceeded_and_invariants(rolled):
    final, traj = rolled
    used, cap = traj["used"], traj["capacity"]
    assert (used <= cap + 1e-5).all()
    assert (used >= 0).all() and (traj["progress"] >= 0).all()
    assert ((traj["trust"] >= 0) & (traj["trust"] <= 1)).all()
    assert np.isfinite(traj["obs"]).all() and np.isfinite(traj["reward"]).all()
    a, mask, err = traj["actions"], traj["mask"], traj["error"]
    n = mask.shape[-1]
    in_range = (a >= 0) & (a < n)
    allowed = np.take_along_axis(mask, np.clip(a, 0, n - 1)[..., None], -1)[..., 0] & in_range
    np.testing.assert_array_equal(err == Error.NONE, allowed)  # valid exactly when the mask allows it
    assert traj["contention"].any() and traj["invalid"].sum() > 0 and (allowed.mean() > 0.5)  # the test had teeth
    done = traj["done"]
    assert done[:, -1].all() and not done[:, :-1].any()
    assert ((traj["belief"] >= 0) & (traj["belief"] <= 1)).all()


def test_random_task_sets_are_well_formed(rolled, batch):
    final, _ = rolled
    params, _ = batch
    rand = np.asarray(params.task_source) == 1
    t = final.tasks
    ex = np.asarray(t.exists)[rand]
    deps = np.asarray(t.deps)[rand]
    assert rand.sum() > 0 and ex[:, :, 0].all()
    for e, d in zip(ex, deps):
        ef = e.reshape(-1)
        assert not (d & ~ef[None, :]).any() and not (d & ~ef[:, None]).any()
        reach = d.copy()
        for _ in range(4):
            reach |= (reach.astype(int) @ reach.astype(int)) > 0
        assert not np.diag(reach).any()
    assert (np.asarray(t.cores)[rand] <= 16).all() and (np.asarray(t.duration_min)[rand][ex] > 0).all()
    assert not np.array_equal(np.asarray(t.cores)[rand][0], np.asarray(t.cores)[rand][1])  # keys differ


def test_curriculum_level_is_traced(rolled, batch):
    final, traj = rolled
    params, _ = batch
    level = np.asarray(params.curriculum_level)
    fixed_crises = np.asarray(params.crisis_source) == 0
    cap = traj["capacity"]
    np.testing.assert_array_equal(np.asarray(final.level), level)
    assert (cap[level == 0] == [16.0, 32.0, 1.0]).all() and (cap[level == 1] == [16.0, 32.0, 1.0]).all()
    assert (cap[level == 4][:, :, 0] <= 12.0).all()  # level 4 cuts cores
    gpu_out = (cap[:, :, GPU] == 0).any(1)
    assert not gpu_out[level <= 2].any() and gpu_out[(level >= 3) & fixed_crises].all()
    made = np.asarray(final.counters.contracts_made)
    assert made[level == 0].sum() == 0 and made[level >= 1].sum() > 0
    assert TRACES["step"] == 1 and TRACES["reset"] == 1  # every level and source: one compilation


def test_deterministic_and_no_retracing(reset, stepper, rolled, batch):
    params, keys = batch
    again = run_rollout(reset, stepper, params, keys)
    jax.tree.map(lambda a, b: np.testing.assert_array_equal(np.asarray(a), np.asarray(b)), rolled, again)
    other = run_rollout(reset, stepper, params, jax.random.split(jax.random.PRNGKey(1), B))
    assert not np.array_equal(other[1]["reward"], rolled[1]["reward"])
    assert TRACES["step"] == 1 and TRACES["reset"] == 1  # 3 x 48 steps + every hand-built test


def test_dict_api_and_registry(env):
    assert {"crisis-v0", "crisis-v0-level0", "crisis-v0-level4"} <= set(nexus_jax.registered_envs())
    e0 = nexus_jax.make("crisis-v0-level0")
    assert int(e0.default_params.curriculum_level) == 0 and int(env.default_params.curriculum_level) == 4
    assert env.agents == ["agent_0", "agent_1", "agent_2"]
    assert env.action_space("agent_0").n == 12
    assert env.observation_space("agent_1").shape == (env.obs_dim,)

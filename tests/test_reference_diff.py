"""Differential tests: the jitted Nexus env against the pure-Python reference (reference.py).

For each N in {2, 4, 7}, one jitted `lax.scan` vmapped over episodes (one compilation per
N) plays short episodes with random actions (plausible ones that are mostly valid,
random in-range rows that are mostly invalid, and wild out-of-range integers), shocks
made frequent, and per-episode params (TTLs, windows, shock duration, storm factor,
reward mode and utility term, vault shaping, early end, archetype mix, patience rule, fair-trade trust, shock
reach...) drawn at random. The reference then replays
every episode on the host with the same reset jitter, actions and step noise, and every
state field, observation, reward, done flag, error code and flow must agree at every step.
"""
from __future__ import annotations

import numpy as np
import pytest

import jax
import jax.numpy as jnp
from flax import serialization

from nexus_jax.envs.nexus import actions as A
from nexus_jax.envs.nexus import core
from nexus_jax.envs.nexus.constants import NUM_ARCHETYPES, ErrorCode, EventKind
from nexus_jax.envs.nexus.params import NexusParams
from nexus_jax.envs.nexus.reference import ReferenceNexus

STEPS = 30
EPISODES = {2: 70, 4: 70, 7: 70}  # 210 episodes in all
FLAT = {2: False, 4: True, 7: False}  # N=4 episodes send flat indices, the others structured rows
STATIC = {  # shape-giving params per N (one compilation each)
    2: dict(amount_grid=(0.0, 1.0, 3.0, 8.0, 25.0), ledger_size=8, obs_ledger_events=4, vault_queue_len=4),
    4: dict(),
    7: dict(ledger_size=16, obs_ledger_events=8, vault_queue_len=5),
}
# The reliance rule (signal_prepay, static: one compilation per N): on at N = 2 and 7, off at N = 4 (nexus-v1's).
PREPAY = {2: 1, 4: 0, 7: 1}
# The patience rule (wait_cost_types): the default, the pre-issue-19 rule (only WAIT pays), every action pays.
WAIT_RULES = ((1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0), (1.0,) + (0.0,) * 7, (1.0,) * 8)
# Tolerance for floats: float32 arithmetic on the JAX side, float64 here.
RTOL, ATOL = 1e-5, 1e-5


def episode_params(n: int, rng: np.random.Generator) -> NexusParams:
    """Random traced params around the defaults, with shocks far more frequent than the default."""
    q = STATIC[n].get("vault_queue_len", 8)
    storm = float(rng.choice([1.0, 1.5]))
    return NexusParams.create(
        num_agents=n, **STATIC[n],
        archetypes=tuple(int(a) for a in rng.integers(0, NUM_ARCHETYPES, n)),
        initial_collateral=float(rng.choice([20.0, 3.0])),
        p_solar_flare=float(rng.choice([0.15, 0.3])),
        p_grid_failure=0.3,
        shock_storm_factor=storm,
        shock_duration=int(rng.integers(1, 4)),
        shock_severity=float(rng.choice([0.2, 0.45])),
        proposal_ttl=int(rng.integers(1, 4)),
        signal_window=int(rng.integers(1, 6)),
        isolation_window=int(rng.choice([2, 5, 10])),
        vault_delay=int(rng.integers(1, q)),
        work_immunity=int(rng.integers(1, 6)),
        base_limit=float(rng.choice([5.0, 20.0])),
        reward_mode=int(rng.integers(0, 2)),
        reward_utility=int(rng.integers(0, 2)),  # nexus-v1's rules: utility as a flow, fair-trade trust, local shocks
        trust_fair_ratio=float(rng.choice([0.0, 0.8, 1.0])),
        shock_reach=float(rng.choice([1.0, 0.5])),
        vault_shaping=float(rng.choice([0.0, 1.0])),
        vault_shaping_ramp=int(rng.choice([0, 7])),
        max_steps=int(rng.choice([20, 100])),
        early_end_after=int(rng.choice([5, 50])),
        early_end_prob=float(rng.choice([0.0, 0.3])),
        signal_prepay=PREPAY[n],
        wait_cost_types=WAIT_RULES[int(rng.integers(0, 3))] if rng.random() < 0.7 else tuple(rng.uniform(0, 2, 8)),
    )


def plausible_actions(key, state, params):
    """(N, 5) structured actions that are mostly valid, without the (N, n_flat) mask (cheap to compile).

    Uniform type; ACCEPT/REJECT name an agent with a proposal (ACCEPT: or a signal) to me, other targets are not
    me; half the PROPOSEs name a seat I have an open signal to, on its terms (honouring it); amounts are capped at
    what I hold. Expiry, credit limits and open signals still make some invalid.
    """
    n, levels = params.num_agents, params.num_levels
    grid = params.grid()
    kt, kj, kp, ka, kb, kr = jax.random.split(key, 6)
    me = jnp.arange(n)
    kind = jax.random.randint(kt, (n,), 0, 8)
    other = (me + jax.random.randint(kj, (n,), 1, n)) % n
    s = state.signals
    incoming = state.proposals.active.T | ((kind == 2)[:, None] & s.active.T)  # [me, proposer or signaller]
    proposer = jax.random.categorical(kp, jnp.where(incoming, 0.0, -1e9))
    promised = jax.random.categorical(kp, jnp.where(s.active, 0.0, -1e9))  # [me, target]: one of my open signals
    honour = (kind == 1) & s.active.any(1) & jax.random.bernoulli(kb, 0.5, (n,))
    target = jnp.where((kind == 2) | (kind == 3), proposer, jnp.where(honour, promised, other))
    res = jnp.where(honour, s.resource[me, promised], jax.random.randint(kr, (n,), 0, 2))
    held = jnp.where(kind == 6, state.vault[me, res], state.available[me, res])
    affordable = (grid[None, :] <= held[:, None]).sum(1) - 1
    level = lambda x: jnp.argmax(grid[None, :] >= x[:, None] - 1e-6, 1)  # noqa: E731  grid level of a signalled amount
    a1 = jnp.where(honour, level(s.give[me, promised]), jnp.minimum(jax.random.randint(ka, (n,), 1, levels), affordable))
    a2 = jnp.where(honour, level(s.want[me, promised]), jax.random.randint(kb, (n,), 0, levels))
    a2 = jnp.where((a1 == 0) & (a2 == 0), 1, a2)
    return jnp.stack([kind, target, a1, a2, res], 1).astype(jnp.int32)


def sample_actions(key, state, params, flat: bool):
    """60% plausible (mostly valid), 25% random in range (mostly invalid), 15% wild.

    Structured (N, 5) rows, wild = out-of-range integers in any field; or, with `flat`, (N,)
    flat indices, wild = indices outside the enumeration.
    """
    n, levels = params.num_agents, params.num_levels
    kv, kr, kw, ku = jax.random.split(key, 4)
    valid = plausible_actions(kv, state, params)
    u = jax.random.uniform(ku, (n, 1))
    if flat:
        size = A.num_flat_actions(n, levels)
        in_range = jax.random.randint(kr, (n,), 0, size)
        wild = jax.random.randint(kw, (n,), -3, 3)
        wild = jnp.where(wild < 0, wild, size + wild)
        pick = A.encode(valid, n, levels)
        return jnp.where(u[:, 0] < 0.6, pick, jnp.where(u[:, 0] < 0.85, in_range, wild)).astype(jnp.int32)
    in_range = jax.random.randint(kr, (n, 5), 0, jnp.array([8, n, levels, levels, 2]))
    wild = jax.random.randint(kw, (n, 5), jnp.array([-2, -2, -2, -2, -1]), jnp.array([10, n + 2, levels + 2, levels + 2, 3]))
    return jnp.where(u < 0.6, valid, jnp.where(u < 0.85, in_range, wild)).astype(jnp.int32)


def rollout(key, params, flat: bool):
    k_reset, k_run = jax.random.split(key)
    obs0, state0 = core.reset(k_reset, params)
    jitter = core.draw_reset_noise(k_reset, params.num_agents)

    def body(state, key):
        k_act, k_noise = jax.random.split(key)
        actions = sample_actions(k_act, state, params, flat)
        noise = core.draw_step_noise(k_noise, params.num_agents)
        obs, state, reward, done, info = core.step_with_noise(state, actions, params, noise)
        out = dict(actions=actions, shock_u=noise.shock_u, end_u=noise.end_u, reach_u=noise.reach_u, obs=obs, state=state,
                   reward=reward, done=done, error_code=info["error_code"], invalid=info["invalid"],
                   utility=info["utility"], flows=info["flows"],
                   relied=info["stats"]["relied"].any(), forwards=info["stats"]["forwards"].any())
        return state, out

    _, traj = jax.lax.scan(body, state0, jax.random.split(k_run, STEPS))
    return dict(jitter=jitter, obs0=obs0, state0=state0, traj=traj)


def flatten(tree, prefix=""):
    """Nested dict (or state pytree) -> {"a.b": np.ndarray}."""
    if not isinstance(tree, dict):
        tree = serialization.to_state_dict(tree)
    out = {}
    for k, v in tree.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, name + "."))
        else:
            out[name] = np.asarray(v)
    return out


def disagreements(ref, jx) -> np.ndarray:
    """Indices where the reference and JAX values disagree (exact for ints and bools)."""
    ref, jx = np.asarray(ref), np.asarray(jx)
    assert ref.shape == jx.shape, f"shape {ref.shape} (reference) vs {jx.shape} (jax)"
    if jx.dtype.kind == "f":
        ok = np.abs(ref.astype(np.float64) - jx) <= ATOL + RTOL * np.abs(ref)
    else:
        ok = ref.astype(jx.dtype) == jx
    return np.argwhere(~ok)


def assert_agree(mine: dict, theirs: dict, where: str, stepped: bool):
    """Compare every named array; with `stepped`, axis 0 is the step and the earliest divergence is reported."""
    first = None
    for name, value in mine.items():
        bad = disagreements(value, theirs[name])
        if len(bad) and (first is None or (stepped and bad[0][0] < first[1][0])):
            first = (name, tuple(int(i) for i in bad[0]))
        if first and not stepped:
            break
    if first:
        name, idx = first
        label = f"step {idx[0]} {name}{list(idx[1:])}" if stepped else f"{name}{list(idx)}"
        raise AssertionError(f"{where} {label}: reference {np.asarray(mine[name])[idx]!r} vs jax {np.asarray(theirs[name])[idx]!r}")


@pytest.fixture(scope="module", params=sorted(EPISODES))
def trajectories(request):
    n = request.param
    rng = np.random.default_rng(1000 + n)
    plist = [episode_params(n, rng) for _ in range(EPISODES[n])]
    batched = jax.tree.map(lambda *xs: jnp.stack(xs), *plist)
    keys = jax.random.split(jax.random.PRNGKey(n), EPISODES[n])
    run = jax.jit(jax.vmap(lambda k, p: rollout(k, p, FLAT[n])))
    out = jax.device_get(run(keys, batched))
    return n, plist, out


def test_reference_agrees_with_jax(trajectories):
    n, plist, out = trajectories
    traj = out["traj"]
    state0 = flatten(out["state0"])  # {"field": (episodes, ...)}
    theirs = {**flatten(traj["state"]), **{k: traj[k] for k in ("obs", "reward", "done", "error_code", "invalid", "utility")},
              **{f"flows.{k}": v for k, v in traj["flows"].items()}}  # {"field": (episodes, steps, ...)}
    for e, params in enumerate(plist):
        ref = ReferenceNexus()
        obs = ref.reset(params, out["jitter"][e])
        mine = {"obs": obs, **flatten(ref.export_state())}
        assert_agree(mine, {"obs": out["obs0"][e], **{k: v[e] for k, v in state0.items()}}, f"N={n} episode {e} reset", False)
        steps = []
        for t in range(STEPS):
            noise = (traj["shock_u"][e, t], traj["end_u"][e, t], traj["reach_u"][e, t])
            obs, reward, done, info = ref.step(traj["actions"][e, t], noise)
            steps.append({**flatten(ref.export_state()), "obs": obs, "reward": reward, "done": done,
                          **{k: info[k] for k in ("error_code", "invalid", "utility")},
                          **{f"flows.{k}": v for k, v in info["flows"].items()}})
        mine = {k: np.stack([np.asarray(s[k]) for s in steps]) for k in steps[0]}
        assert_agree(mine, {k: theirs[k][e] for k in mine}, f"N={n} episode {e}", True)


def test_episodes_exercise_the_rules(trajectories):
    """The random episodes reach every error code and every ledger event kind the rules can produce."""
    n, _, out = trajectories
    traj = out["traj"]
    codes = set(np.unique(traj["error_code"]).tolist())
    kinds = set(np.unique(traj["state"].ledger.kind).tolist())
    if FLAT[n]:  # flat indices decode to in-range rows, or to BAD_INDEX
        never = {ErrorCode.BAD_TYPE, ErrorCode.BAD_TARGET, ErrorCode.BAD_AMOUNT}
    else:  # structured rows cannot be out-of-range flat indices
        never = {ErrorCode.BAD_INDEX}
    assert set(ErrorCode) - never <= codes, sorted(set(ErrorCode) - never - codes)
    assert set(EventKind) - {EventKind.EMPTY} <= kinds, sorted(set(EventKind) - kinds)
    assert traj["done"].any() and not traj["done"].all()
    if PREPAY[n]:  # signals paid ahead, forwards delivered
        assert traj["relied"].any() and traj["forwards"].any()

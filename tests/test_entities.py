"""Entity view and entity network: relabelling the seats permutes rows and target logits and nothing else;
one set of parameters acts at every N; padding changes nothing."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nexus_jax
from nexus_jax.envs.nexus.constants import Archetype as Ar
from nexus_jax.envs.nexus.dynamics import action_snapshot
from nexus_jax.envs.nexus.entities import F_EVENT, F_OWN, F_SEAT, layout, observe_entities, observe_one, SEAT_FEATURES
from nexus_jax.envs.nexus.validity import factored_masks, flat_mask
from train.entity_net import TARGETED, EntityActorCritic

N = 5
PERM = np.array([3, 0, 4, 1, 2])  # seat i of the original state is seat PERM[i] of the relabelled one


def permute_state(state, perm):
    """The same economy with seat i renamed perm[i]: every seat axis reordered, ledger parties renamed."""
    perm = jnp.asarray(perm)
    inv = jnp.argsort(perm)
    n = perm.shape[0]

    def seat_axes(x, axes):
        for a in axes:
            x = jnp.take(x, inv, axis=a)
        return x

    rename = lambda j: jnp.where(j >= 0, perm[jnp.clip(j, 0, n - 1)], j)  # noqa: E731
    pair = lambda t: jax.tree.map(lambda x: seat_axes(x, (0, 1)), t)  # noqa: E731
    one = ("available", "escrow", "vault", "withdrawals", "collateral", "tax_immunity", "last_trade_step",
           "archetype", "last_error", "last_outcome")
    return state.replace(**{k: seat_axes(getattr(state, k), (0,)) for k in one},
                         trust=seat_axes(state.trust, (0, 1)), npc_memory=seat_axes(state.npc_memory, (0, 1)),
                         proposals=pair(state.proposals), signals=pair(state.signals),
                         ledger=state.ledger.replace(actor=rename(state.ledger.actor),
                                                     target=rename(state.ledger.target)))


@pytest.fixture(scope="module")
def busy_state():
    """A real mid-episode state at N=5 with open proposals, signals and ledger events (NPCs play; seat 0 waits)."""
    env = nexus_jax.make("nexus-v0", num_agents=N, archetypes=(Ar.LEARNER, Ar.BULLY, Ar.CHEATER, Ar.ALTRUIST,
                                                                Ar.RECIPROCATOR), action_format="structured")

    @jax.jit
    def run(key):
        _, s = env.reset_env(key, env.default_params)

        def body(s, k):
            _, s, *_ = env.step_env(k, s, jnp.zeros((1, 5), jnp.int32), env.default_params)
            return s, s

        return jax.lax.scan(body, s, jax.random.split(key, 12))[1]

    states = run(jax.random.PRNGKey(3))
    busy = np.asarray(states.proposals.active.sum((1, 2)) + states.signals.active.sum((1, 2)))
    t = int(np.argmax(busy))
    return env.default_params, jax.tree.map(lambda x: x[t], states)


@jax.jit
def masks_of(state, params):
    return factored_masks(flat_mask(action_snapshot(state, params), params), params)


@functools.partial(jax.jit, static_argnames="pad_to")
def views(state, params, pad_to=None):
    return observe_entities(state, params, None, pad_to)


def view(state, params, i, pad_to=None):
    """Seat i's entity view with (1, 1) leading axes (batch, learner)."""
    return jax.tree.map(lambda x: x[i][None, None], views(state, params, pad_to))


def test_busy_state_is_busy(busy_state):
    params, s = busy_state
    assert int(s.proposals.active.sum()) >= 1 and int(s.signals.active.sum()) >= 1
    assert int(s.ledger.count) >= 8


def test_shapes_and_layout(busy_state):
    params, s = busy_state
    e = views(s, params)
    assert e.own.shape == (N, F_OWN) and e.seats.shape == (N, N - 1, F_SEAT) and e.events.shape == (N, 8, F_EVENT)
    assert sum(x.stop - x.start for x in layout(SEAT_FEATURES).values()) == F_SEAT
    # rows are the other seats in relative order: row r of seat i is seat (i + 1 + r) % N
    np.testing.assert_array_equal(np.asarray(e.seat_id), (np.arange(N)[:, None] + 1 + np.arange(N - 1)) % N)
    # trust both ways is where the layout says
    sl = layout(SEAT_FEATURES)
    np.testing.assert_allclose(np.asarray(e.seats[1, 0, sl["trust_mine"]]), np.asarray(s.trust[1, 2])[None])
    np.testing.assert_allclose(np.asarray(e.seats[1, 0, sl["trust_theirs"]]), np.asarray(s.trust[2, 1])[None])
    with pytest.raises(ValueError, match="pad_to"):
        observe_one(s, params, 0, pad_to=N - 1)


def test_relabelling_permutes_rows_exactly(busy_state):
    params, s = busy_state
    e, ep = views(s, params), views(permute_state(s, PERM), params)
    for i in range(N):
        a = jax.tree.map(lambda x: np.asarray(x[i]), e)
        b = jax.tree.map(lambda x: np.asarray(x[PERM[i]]), ep)
        np.testing.assert_array_equal(a.own, b.own)
        np.testing.assert_array_equal(a.events, b.events)
        np.testing.assert_array_equal(a.event_mask, b.event_mask)
        # row r of the relabelled view shows original seat inv[seat_id]: that seat's original row
        inv = np.argsort(PERM)
        orig_row = [(inv[j] - i - 1) % N for j in b.seat_id]
        np.testing.assert_array_equal(b.seats, a.seats[orig_row])
        new_row = {o: r for r, o in enumerate(orig_row)}  # original row -> relabelled row
        for ev_a, ev_b in ((a.event_actor, b.event_actor), (a.event_target, b.event_target)):
            np.testing.assert_array_equal(ev_b, [new_row[x] if x >= 0 else -1 for x in ev_a])
    assert (np.asarray(e.event_actor) >= 0).any()  # events do point at seat rows


@functools.lru_cache(maxsize=None)
def _jitted(num_levels: int, hidden: int):
    pol = EntityActorCritic(1, num_levels, hidden)
    return pol, jax.jit(pol.init), jax.jit(pol.act), jax.jit(pol.logits), jax.jit(pol.evaluate)


def _params(obs, masks, scale=20.0):
    pol, init, *_ = _jitted(7, 16)
    # Large weights make every logit depend strongly on its inputs: a broken symmetry would show.
    return jax.tree.map(lambda x: x * scale, init(jax.random.PRNGKey(0), obs, masks))


def _batch(tree):
    return jax.tree.map(lambda x: x[None, None], tree)


@pytest.mark.slow
def test_policy_outputs_relabel_with_the_seats(busy_state):
    params, s = busy_state
    sp = permute_state(s, PERM)
    m, mp = masks_of(s, params), masks_of(sp, params)
    pol, _, act, logits, evaluate = _jitted(7, 16)
    theta = _params(view(s, params, 0), _batch(jax.tree.map(lambda x: x[0], m)))
    checked_targeted = 0
    for i in range(N):
        o, op = view(s, params, i), view(sp, params, PERM[i])
        mi, mpi = _batch(jax.tree.map(lambda x: x[i], m)), _batch(jax.tree.map(lambda x: x[PERM[i]], mp))
        for k in range(6):
            a = act(theta, o, mi, jax.random.PRNGKey(10 * i + k))[0]
            ap = a.at[..., 1].set(jnp.where(TARGETED[a[..., 0]], PERM[a[..., 1]], 0))  # same action, relabelled
            la, lb = logits(theta, o, mi, a), logits(theta, op, mpi, ap)
            for head in ("type", "resource", "amount_1", "amount_2"):
                np.testing.assert_allclose(np.asarray(lb[head]), np.asarray(la[head]), rtol=0, atol=2e-5)
            inv = np.argsort(PERM)
            orig_row = [(inv[j] - i - 1) % N for j in np.asarray(op.seat_id)[0, 0]]
            np.testing.assert_allclose(np.asarray(lb["target"])[0, 0], np.asarray(la["target"])[0, 0, orig_row],
                                       rtol=0, atol=2e-5)
            np.testing.assert_allclose(np.asarray(evaluate(theta, op, mpi, ap)[0]),
                                       np.asarray(evaluate(theta, o, mi, a)[0]), rtol=0, atol=5e-5)
            checked_targeted += int(TARGETED[int(a[0, 0, 0])])
    assert checked_targeted >= 3  # the pointer head was exercised, not only untargeted types


@pytest.mark.parametrize("n", [2, 8, pytest.param(64, marks=pytest.mark.slow)])
def test_one_set_of_params_acts_at_every_n(busy_state, n):
    params4, s4 = busy_state
    theta = _params(view(s4, params4, 0), _batch(jax.tree.map(lambda x: x[0], masks_of(s4, params4))))
    pol, _, act, _, evaluate = _jitted(7, 16)
    env = nexus_jax.make("nexus-v0", num_agents=n, action_format="structured")

    @jax.jit
    def first_obs(key):
        _, s = env.reset(key)
        return jax.tree.map(lambda x: x[None], (env.entity_obs(s), env.factored_action_masks(s)))  # (1, 1, ...)

    obs, masks = first_obs(jax.random.PRNGKey(n))
    assert obs.seats.shape[-2] == n - 1
    for k in range(4):
        a, lp, _ = act(theta, obs, masks, jax.random.PRNGKey(k))
        t, j = int(a[0, 0, 0]), int(a[0, 0, 1])
        assert bool(masks["type"][0, 0, t]) and bool(masks["target"][0, 0, t, j])
        assert np.isfinite(float(lp[0, 0])) and float(lp[0, 0]) <= 0.0
        np.testing.assert_allclose(np.asarray(evaluate(theta, obs, masks, a)[0]), np.asarray(lp), atol=1e-5)


def test_padding_changes_nothing(busy_state):
    params, s = busy_state
    m = _batch(jax.tree.map(lambda x: x[2], masks_of(s, params)))
    o, op = view(s, params, 2), view(s, params, 2, pad_to=9)
    assert op.seats.shape[-2] == 8 and not bool(op.seat_mask[0, 0, N - 1:].any())
    pol, _, act, logits, _ = _jitted(7, 16)
    theta = _params(o, m)
    for k in range(4):
        a = act(theta, o, m, jax.random.PRNGKey(k))[0]
        la, lb = logits(theta, o, m, a), logits(theta, op, m, a)
        for head in ("type", "resource", "amount_1", "amount_2"):
            np.testing.assert_allclose(np.asarray(lb[head]), np.asarray(la[head]), atol=2e-5)
        np.testing.assert_allclose(np.asarray(lb["target"])[..., :N - 1], np.asarray(la["target"]), atol=2e-5)
        assert (np.asarray(lb["target"])[..., N - 1:] < -1e8).all()

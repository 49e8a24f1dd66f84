"""NPC archetypes: behaviour on hand-built states, memory updates, and rates over many vmapped episodes."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nexus_jax
from nexus_jax.envs.nexus import core
from nexus_jax.envs.nexus.constants import ActionType as T, Archetype as Ar, ErrorCode
from nexus_jax.envs.nexus.npc import Slot, npc_actions, step_with_npcs, update_npc_memory
from nexus_jax.envs.nexus.params import NexusParams

N = 4
KEYS = jax.random.split(jax.random.PRNGKey(0), 64)
STAT_KEYS = ("signals_broken", "broken_force_majeure", "rejects", "proposals", "trades", "signals_honoured",
             "signals_made")


def make_params(archetypes, **kw):
    return NexusParams.create(num_agents=N, archetypes=archetypes, endowment_jitter=0.0, **kw)


@pytest.fixture(scope="module")
def policy():
    """npc_actions vmapped over keys, jitted once: params (traced) and hand-built states vary freely."""
    return jax.jit(jax.vmap(npc_actions, in_axes=(0, None, None)))


@pytest.fixture(scope="module")
def memory_update():
    return jax.jit(update_npc_memory)


def fresh(params, available=None, memory=None):
    s = core.initial_state(params, jnp.zeros((N, 2)))
    if available is not None:
        s = s.replace(available=jnp.asarray(available, jnp.float32))
    if memory is not None:
        s = s.replace(npc_memory=jnp.asarray(memory, jnp.float32))
    return s


def with_offer(s, frm, to, give, want, resource):
    """`frm` has a pending proposal to `to`: give of `resource` (escrowed) for want of the other."""
    p = s.proposals
    return s.replace(
        proposals=p.replace(active=p.active.at[frm, to].set(True), give=p.give.at[frm, to].set(give),
                            want=p.want.at[frm, to].set(want), resource=p.resource.at[frm, to].set(resource),
                            age=p.age.at[frm, to].set(0)),
        available=s.available.at[frm, resource].add(-give), escrow=s.escrow.at[frm, resource].add(give))


def stats(**tables):
    z = jnp.zeros((N, N), bool)
    return {"stats": {k: jnp.asarray(tables.get(k, z)) for k in STAT_KEYS}}


def pair(i, j):
    return jnp.zeros((N, N), bool).at[i, j].set(True)


def actions_of(policy, params, state, seat):
    return np.asarray(policy(KEYS, state, params)[:, seat])


def test_altruist_accepts_any_offer_when_low_on_energy(policy):
    p = make_params((Ar.LEARNER, Ar.ALTRUIST, Ar.TIT_FOR_TAT, Ar.BULLY))
    low = [[50, 50], [10, 90], [40, 60], [90, 10]]  # the altruist holds 10 E < npc_low_level
    lowball = lambda s: with_offer(s, 0, 1, 5.0, 20.0, 0)  # noqa: E731  (5 E for 20 C: ratio 0.25)
    a = actions_of(policy, p, lowball(fresh(p, low)), 1)
    assert (a[:, 0] == T.ACCEPT).all() and (a[:, 1] == 0).all()
    rich = [[50, 50], [60, 90], [40, 60], [90, 10]]  # not low on Energy: the lowball is not acceptable
    a = actions_of(policy, p, lowball(fresh(p, rich)), 1)
    assert not (a[:, 0] == T.ACCEPT).any()


def test_bully_refuses_small_offers_and_takes_large_ones(policy):
    p = make_params((Ar.LEARNER, Ar.BULLY, Ar.ALTRUIST, Ar.TIT_FOR_TAT))
    s = fresh(p, [[50, 90], [90, 10], [10, 90], [40, 60]])
    for give, want in [(10.0, 5.0), (20.0, 10.0), (20.0, 1.0)]:  # small, even when generous
        a = actions_of(policy, p, with_offer(s, 0, 1, give, want, 1), 1)
        assert not (a[:, 0] == T.ACCEPT).any(), (give, want)
    a = actions_of(policy, p, with_offer(s, 0, 1, 40.0, 20.0, 1), 1)
    assert (a[:, 0] == T.ACCEPT).all()
    a = actions_of(policy, p, s, 1)  # its own proposals lowball and it never signals
    props = a[a[:, 0] == T.PROPOSE]
    assert len(props) > 0 and (props[:, 2] < props[:, 3]).all()
    assert not (a[:, 0] == T.SIGNAL).any()


def test_tit_for_tat_mirrors_last_behaviour(policy, memory_update):
    p = make_params((Ar.LEARNER, Ar.ALTRUIST, Ar.BULLY, Ar.TIT_FOR_TAT))
    s = fresh(p)
    # memory: agent 0 rejected TFT's proposal (defect); agent 1 traded with TFT (cooperate)
    mem = memory_update(s, s, stats(rejects=pair(3, 0), trades=pair(1, 3)), p)
    assert mem[3, 0, Slot.LAST] == -1 and mem[3, 1, Slot.LAST] == 1 and mem[3, 2, Slot.LAST] == 0
    s = s.replace(npc_memory=mem)
    offer = dict(give=5.0, want=10.0, resource=0)  # a mediocre offer (ratio 0.5)
    from_defector = actions_of(policy, p, with_offer(s, 0, 3, **offer), 3)
    assert (from_defector[:, 0] == T.REJECT).all() and (from_defector[:, 1] == 0).all()
    from_cooperator = actions_of(policy, p, with_offer(s, 1, 3, **offer), 3)
    assert (from_cooperator[:, 0] == T.ACCEPT).all()
    from_stranger = actions_of(policy, p, with_offer(s, 2, 3, **offer), 3)
    assert not (from_stranger[:, 0] == T.ACCEPT).any()
    # and it never proposes to the defector
    a = actions_of(policy, p, s, 3)
    assert not ((a[:, 0] == T.PROPOSE) & (a[:, 1] == 0)).any() and ((a[:, 0] == T.PROPOSE) & (a[:, 1] == 1)).any()
    # a later cooperation by agent 0 (a fair proposal) flips it back
    s2 = with_offer(s, 0, 3, 10.0, 10.0, 0)
    mem2 = memory_update(s, s2, stats(proposals=pair(0, 3)), p)
    assert mem2[3, 0, Slot.LAST] == 1


@pytest.fixture(scope="module")
def rollout():
    """All-NPC episodes of 40 steps over a batch of 256 (key, start state, params): compiled once, shared.

    Returns per seat (256, 5, N): trades with seat 0, signals honoured, broken, broken maliciously, invalid.
    """
    def episode(key, state, params):
        def body(st, k):
            _, st, _, _, info = step_with_npcs(k, st, jnp.zeros((0, 5), jnp.int32), params, ())
            x = info["stats"]
            t = x["trades"] | x["trades"].T
            mal = x["signals_broken"] & ~x["broken_force_majeure"]
            return st, jnp.stack([t[0], x["signals_honoured"].sum(1), x["signals_broken"].sum(1), mal.sum(1),
                                  info["error_code"] != ErrorCode.OK]).astype(jnp.int32)
        return jax.lax.scan(body, state, jax.random.split(key, 40))[1].sum(0)

    return jax.jit(jax.vmap(episode))


BATCH = 256


def batched(tree, size=BATCH):
    return jax.tree.map(lambda x: jnp.broadcast_to(x, (size,) + jnp.shape(x)), tree)


def test_reciprocator_trades_less_with_malicious_than_force_majeure_breaker(policy, memory_update, rollout):
    p = make_params((Ar.RECIPROCATOR, Ar.ALTRUIST, Ar.ALTRUIST, Ar.TIT_FOR_TAT))
    s = fresh(p, [[50, 50], [50, 50], [50, 50], [40, 60]])
    # agent 1 broke a signal to the reciprocator maliciously; agent 2 broke one under force majeure
    info = stats(signals_broken=pair(1, 0) | pair(2, 0), broken_force_majeure=pair(2, 0))
    mem = memory_update(s, s, info, p)
    assert mem[0, 1, Slot.MALICIOUS] == 1 and mem[0, 2, Slot.FORCE_MAJEURE] == 1 and mem[0, 2, Slot.MALICIOUS] == 0
    s = s.replace(npc_memory=mem)
    for partner, accepts in [(1, False), (2, True)]:
        a = actions_of(policy, p, with_offer(s, partner, 0, 10.0, 10.0, 0), 0)
        assert ((a[:, 0] == T.ACCEPT).all() if accepts else not (a[:, 0] == T.ACCEPT).any())

    # over whole episodes, the reciprocator trades less with the malicious breaker (same archetype, same holdings)
    p = p.replace(npc_memory_decay=jnp.float32(0.99))  # traced: same compiled rollout
    keys = jax.random.split(jax.random.PRNGKey(2), BATCH)
    trades = np.asarray(rollout(keys, batched(s), batched(p)))[:, 0].sum(0)
    assert trades[1] < 0.5 * trades[2], trades


def test_cheater_breaks_signals_at_its_configured_rate_and_npcs_are_always_valid(rollout):
    base = dict(archetypes=(Ar.CHEATER, Ar.ALTRUIST, Ar.TIT_FOR_TAT, Ar.RECIPROCATOR))
    rates = (0.2, 0.8)
    half = BATCH // 2
    params = [batched(make_params(**base, npc_break_rate=(0, 0, 0, 0, 0, r)), half) for r in rates]
    params = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), *params)
    keys = jax.random.split(jax.random.PRNGKey(1), BATCH)
    states = jax.vmap(core.reset)(keys, params)[1]
    out = np.asarray(rollout(keys, states, params))  # (BATCH, 5, N)
    for i, r in enumerate(rates):
        _, honoured, broken, malicious, invalid = out[i * half:(i + 1) * half].sum(0)
        assert invalid.sum() == 0  # every NPC action is valid
        closed = honoured[0] + broken[0]
        assert closed > 200
        assert abs(malicious[0] / closed - r) < 0.1, (malicious[0] / closed, r)
        assert malicious[1:].sum() <= 0.02 * (honoured[1:] + broken[1:]).sum()  # honest archetypes keep promises


def test_learner_view_and_selfplay_identity():
    env = nexus_jax.make("nexus-v0", info_mode="full")
    assert env.agents == ["agent_0"] and env.npc_seats == (1, 2, 3)
    assert env.default_params.archetypes.tolist() == [Ar.LEARNER, Ar.BULLY, Ar.ALTRUIST, Ar.TIT_FOR_TAT]
    obs, state = env.reset(jax.random.PRNGKey(0))
    assert set(obs) == {"agent_0"} and env.get_avail_actions(state)["agent_0"].shape == (env.action_space("agent_0").n,)
    obs, state, rew, dones, info = env.step(jax.random.PRNGKey(1), state, {"agent_0": 0})
    assert set(rew) == {"agent_0"} and info["rewards_all"].shape == (N,) and dones["__all__"].shape == ()
    sp = nexus_jax.make("nexus-selfplay-v0")
    assert sp.agents == [f"agent_{i}" for i in range(N)] and sp.npc_seats == ()
    with pytest.raises(ValueError):
        nexus_jax.make("nexus-v0", learner_seats=(4,))


def with_signal(s, frm, to, give, want, resource, age, intent=1.0):
    """`frm` has an open signal to `to` (give of `resource` for want of the other), `age` steps old, meant as `intent`."""
    g = s.signals
    mem = s.npc_memory.at[frm, to, Slot.INTENT].set(intent)
    return s.replace(npc_memory=mem, signals=g.replace(
        active=g.active.at[frm, to].set(True), give=g.give.at[frm, to].set(give), want=g.want.at[frm, to].set(want),
        resource=g.resource.at[frm, to].set(resource), age=g.age.at[frm, to].set(age)))


def test_honour_delay_keeps_the_promise_aside_and_honours_on_time(policy):
    """npc_honour_delay: the promise stays open until it is older than the delay (or the next upkeep would
    leave the seat short); meanwhile nothing the seat does spends the promised amount."""
    arch = (Ar.LEARNER, Ar.RECIPROCATOR, Ar.ALTRUIST, Ar.TIT_FOR_TAT)
    grid = list(NexusParams.create().amount_grid)
    holdings = [[50, 50], [60, 20], [10, 90], [40, 60]]  # seat 1 rich in Energy, even after the promise
    honour = lambda a: (a[:, 0] == T.PROPOSE) & (a[:, 1] == 0) & (a[:, 2] == grid.index(20.0))  # noqa: E731
    default = make_params(arch)
    delayed = make_params(arch, npc_honour_delay=(0, 0, 0, 0, 4, 0))
    s = with_signal(fresh(default, holdings), 1, 0, 20.0, 10.0, 0, age=1)  # the snapshot sees age 2
    assert honour(actions_of(policy, default, s, 1)).all()  # default: at the first chance
    a = actions_of(policy, delayed, s, 1)
    assert not honour(a).any()
    spends_energy = np.isin(a[:, 0], [T.PROPOSE, T.SIGNAL]) & (a[:, 4] == 0)
    assert spends_energy.any()  # it still trades, from what is not promised:
    assert (np.asarray(grid)[a[spends_energy, 2]] <= 60 - 20 - 1).all()
    assert honour(actions_of(policy, delayed, with_signal(fresh(default, holdings), 1, 0, 20.0, 10.0, 0, age=4),
                             1)).all()  # snapshot age 5 > 4: the window's last step
    tight = [[50, 50], [20.5, 40], [10, 90], [40, 60]]  # one more upkeep would leave it short: honour now
    assert honour(actions_of(policy, delayed, with_signal(fresh(default, tight), 1, 0, 20.0, 10.0, 0, age=1), 1)).all()
    # a signal it means to break is not kept aside
    a = actions_of(policy, delayed, with_signal(fresh(default, holdings), 1, 0, 20.0, 10.0, 0, age=1, intent=-1.0), 1)
    assert not honour(a).any()


def test_signal_cap_bounds_what_a_signal_promises(policy):
    arch = (Ar.LEARNER, Ar.RECIPROCATOR, Ar.ALTRUIST, Ar.TIT_FOR_TAT)
    grid = np.asarray(NexusParams.create().amount_grid)
    holdings = [[50, 50], [30, 5], [10, 90], [40, 60]]
    for cap, promised in ((0.5, 10.0), (0.8, 20.0)):  # 2 x offer 10, at most cap x 30 Energy, snapped down
        p = make_params(arch, npc_signal_rate=(0, 0, 0, 0, 1, 0), npc_signal_generosity=(1, 1, 1, 1, 2, 1),
                        npc_signal_cap=(0.5, 0.5, 0.5, 0.5, cap, 0.5))
        a = actions_of(policy, p, fresh(p, holdings), 1)
        sig = a[a[:, 0] == T.SIGNAL]
        assert len(sig) > 0 and (grid[sig[:, 2]] == promised).all() and (sig[:, 4] == 0).all(), (cap, sig)


# ---- the v1 NPC rules (nexus_jax.envs.nexus.versions.V1_RULES): each off in v0 --------------------------------
def test_the_accept_floor_stops_even_a_desperate_altruist_taking_a_lowball(policy):
    """npc_accept_floor 0.8: the ALTRUIST low on Energy that takes 5 E for 20 C under v0 refuses it, and takes a
    fair offer."""
    p = make_params((Ar.LEARNER, Ar.ALTRUIST, Ar.TIT_FOR_TAT, Ar.BULLY), npc_accept_floor=0.8)
    low = fresh(p, [[50, 50], [10, 90], [40, 60], [90, 10]])
    assert not (actions_of(policy, p, with_offer(low, 0, 1, 5.0, 20.0, 0), 1)[:, 0] == T.ACCEPT).any()
    a = actions_of(policy, p, with_offer(low, 0, 1, 10.0, 10.0, 0), 1)
    assert (a[:, 0] == T.ACCEPT).all() and (a[:, 1] == 0).all()


def test_npcs_do_not_deal_with_a_partner_they_trust_below_npc_min_trust(policy):
    """npc_min_trust 0.4: a fair offer from a partner the ALTRUIST trusts at 0.3 is not accepted, nor does the
    ALTRUIST propose or signal to it; at 0.5 it is accepted."""
    p = make_params((Ar.LEARNER, Ar.ALTRUIST, Ar.TIT_FOR_TAT, Ar.BULLY), npc_min_trust=(0.0, 0.0, 0.4, 0.0, 0.0, 0.0))
    s = with_offer(fresh(p, [[50, 50], [10, 90], [40, 60], [90, 10]]), 0, 1, 10.0, 10.0, 0)
    distrusted = s.replace(trust=s.trust.at[1, 0].set(0.3))
    a = actions_of(policy, p, distrusted, 1)
    assert not ((a[:, 0] == T.ACCEPT) | (a[:, 0] == T.PROPOSE) | (a[:, 0] == T.SIGNAL))[a[:, 1] == 0].any()
    assert (actions_of(policy, p, s, 1)[:, 0] == T.ACCEPT).all()


def test_trading_by_need_offers_surplus_and_refuses_trades_that_cost_utility(policy):
    """npc_offer_by_need 1: a RECIPROCATOR holding (30, 26) offers at most half its surplus (2 of 4) and asks the
    same; an ALTRUIST holding (30, 26) refuses 10 E for 10 C, a fair offer that would drop its U from 26 to 16."""
    p = make_params((Ar.RECIPROCATOR, Ar.ALTRUIST, Ar.TIT_FOR_TAT, Ar.BULLY), npc_offer_by_need=1, npc_propose_rate=(1.0,) * 6)
    s = fresh(p, [[30, 26], [10, 90], [40, 60], [90, 10]])
    grid = np.asarray(p.amount_grid)
    props = actions_of(policy, p, s, 0)
    props = props[props[:, 0] == T.PROPOSE]
    assert len(props) and (grid[props[:, 2]] <= 2.0).all() and (props[:, 2] == props[:, 3]).all()
    offer = with_offer(fresh(p, [[90, 10], [30, 26], [40, 60], [10, 90]]), 0, 1, 10.0, 10.0, 0)  # E for its C
    assert not (actions_of(policy, p, offer, 1)[:, 0] == T.ACCEPT).any()


def test_trust_volume_sizes_deals_by_trust(policy):
    """npc_trust_volume 55: an NPC deals with partner j at most 55 x T[me, j] (give + want). A RECIPROCATOR holding
    (90, 10) offers 20 to the partner it trusts 0.8 (cap 44) and 10 to those it trusts 0.5 (cap 27.5); an ALTRUIST
    accepts 20 E for 20 C from a partner it trusts 0.8, and not from one it trusts 0.5."""
    p = make_params((Ar.RECIPROCATOR, Ar.ALTRUIST, Ar.TIT_FOR_TAT, Ar.ALTRUIST), npc_offer_by_need=1,
                    npc_propose_rate=(1.0,) * 6, npc_trust_volume=(55.0,) * 6)
    grid = np.asarray(p.amount_grid)
    s = fresh(p, [[90, 10], [10, 90], [40, 60], [10, 90]])
    s = s.replace(trust=s.trust.at[0, 1].set(0.8))
    props = actions_of(policy, p, s, 0)
    props = props[props[:, 0] == T.PROPOSE]
    to_trusted = props[props[:, 1] == 1]
    to_others = props[props[:, 1] != 1]
    assert len(to_trusted) and len(to_others)
    assert (grid[to_trusted[:, 2]] == 20.0).all() and (grid[to_others[:, 2]] == 10.0).all()
    offer = with_offer(fresh(p, [[90, 10], [10, 90], [40, 60], [10, 90]]), 0, 1, 20.0, 20.0, 0)
    assert not (actions_of(policy, p, offer, 1)[:, 0] == T.ACCEPT).any()
    trusted = offer.replace(trust=offer.trust.at[1, 0].set(0.8))
    assert (actions_of(policy, p, trusted, 1)[:, 0] == T.ACCEPT).all()


def test_npcs_pay_ahead_on_a_signal_they_would_accept_as_a_proposal(policy):
    """signal_prepay 1: a RECIPROCATOR short of Energy pays ahead on a partner's signal of 10 E for 10 C (the terms
    it would accept from a proposal), not once it holds malicious breaks against that partner, and never without
    the rule (there ACCEPT needs a proposal)."""
    p = make_params((Ar.ALTRUIST, Ar.RECIPROCATOR, Ar.TIT_FOR_TAT, Ar.BULLY), npc_offer_by_need=1, signal_prepay=1)
    s = with_signal(fresh(p, [[90, 10], [10, 90], [40, 60], [90, 10]]), 0, 1, 10.0, 10.0, 0, age=0)
    a = actions_of(policy, p, s, 1)
    assert ((a[:, 0] == T.ACCEPT) & (a[:, 1] == 0)).all()
    off = actions_of(policy, p.replace(signal_prepay=0), s, 1)
    assert not (off[:, 0] == T.ACCEPT).any()
    mem = s.npc_memory.at[1, 0, Slot.MALICIOUS].set(3.0)
    assert not (actions_of(policy, p, s.replace(npc_memory=mem), 1)[:, 0] == T.ACCEPT).any()

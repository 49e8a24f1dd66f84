"""One test per action type and per phase, on small hand-built states (N=4, no jitter).

Seats at reset: 0 LEARNER (50 E, 50 C), 1 BULLY (90, 10), 2 ALTRUIST (10, 90), 3 TIT_FOR_TAT
(40, 60); collateral 20, trust 0.5. Income per step (1,1), (2,0), (0,2), (1,1); upkeep (1,1).
"""
import jax
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from conftest import FLARE, NO_SHOCK
from nexus_jax.envs.nexus.constants import ActionType as T, ErrorCode as E, EventKind as K, Outcome as O
from nexus_jax.envs.nexus.ledger import append, make_events
from nexus_jax.envs.nexus.observation import observation_layout
from nexus_jax.envs.nexus.params import NexusParams
from nexus_jax.envs.nexus.state import empty_ledger
from nexus_jax.envs.nexus.trust import volume_weight

WAIT = (T.WAIT, 0, 0, 0, 0)


def lv(x):
    return (0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 40.0).index(float(x))


def propose(j, give, want, r=0):
    return (T.PROPOSE, j, lv(give), lv(want), r)


def signal(j, give, want, r=0):
    return (T.SIGNAL, j, lv(give), lv(want), r)


def accept(j):
    return (T.ACCEPT, j, 0, 0, 0)


def reject(j):
    return (T.REJECT, j, 0, 0, 0)


def acts(**by_agent):
    """Actions for 4 agents: everyone WAITs except those named a0..a3."""
    return [by_agent.get(f"a{i}", WAIT) for i in range(4)]


def ledger_events(state):
    lg = state.ledger
    k = int(lg.count)
    size = lg.kind.shape[0]
    idx = [(int(lg.head) - k + i) % size for i in range(max(0, k - size), k)]
    return [(int(lg.kind[i]), int(lg.actor[i]), int(lg.target[i])) for i in idx]


def w(volume):
    return float(volume_weight(np.float32(volume), NexusParams.create()))


def test_wait_costs_collateral_and_reward_matches_formula(nexus):
    _, s, r, done, info = nexus.step(nexus.state0, acts())
    np.testing.assert_allclose(s.collateral, 19.5)
    np.testing.assert_allclose(s.available, [[50, 50], [91, 9], [9, 91], [40, 60]])
    # dU_system = (50 + 9 + 9 + 40) - (50 + 10 + 10 + 40) = -2; dColl = -0.5; no shock, all valid.
    np.testing.assert_allclose(r, 0.7 * -2 + 0.2 * -0.5, rtol=1e-6)
    assert not bool(done)
    assert int(s.step) == 1


def test_reward_own_mode_uses_own_utility(nexus):
    own = nexus.params.replace(reward_mode=np.int32(1))
    _, _, r, _, _ = nexus.step(nexus.state0, acts(), params=own)
    d_own = np.array([0.0, -1.0, -1.0, 0.0])
    np.testing.assert_allclose(r, 0.7 * d_own + 0.2 * -0.5, rtol=1e-6)


def test_propose_locks_escrow_and_deposit(nexus):
    _, s, r, _, info = nexus.step(nexus.state0, acts(a0=propose(1, 10, 5)))
    assert int(info["error_code"][0]) == E.OK
    np.testing.assert_allclose(s.available[0], [40, 50])
    np.testing.assert_allclose(s.escrow[0], [10, 0])
    np.testing.assert_allclose(s.collateral[0], 19.0)  # deposit, no wait cost
    p = s.proposals
    assert bool(p.active[0, 1]) and float(p.give[0, 1]) == 10 and float(p.want[0, 1]) == 5
    assert int(p.resource[0, 1]) == 0 and int(p.age[0, 1]) == 0
    assert (K.PROPOSAL, 0, 1) in ledger_events(s)


def test_propose_reverse_direction(nexus):
    _, s, _, _, info = nexus.step(nexus.state0, acts(a2=propose(1, 20, 10, r=1)))
    assert int(info["error_code"][2]) == E.OK
    np.testing.assert_allclose(s.escrow[2], [0, 20])
    assert int(s.proposals.resource[2, 1]) == 1


def test_accept_settles_trade_atomically(nexus):
    _, s1, _, _, _ = nexus.step(nexus.state0, acts(a0=propose(1, 10, 5)))
    _, s, _, _, info = nexus.step(s1, acts(a1=accept(0)))
    assert int(info["error_code"][1]) == E.OK
    np.testing.assert_allclose(s.available[0], [40, 55])  # +5 C; income and upkeep cancel
    np.testing.assert_allclose(s.available[1], [91 + 10 + 1, 9 - 5 - 1])
    np.testing.assert_allclose(s.escrow, 0.0)
    wt = w(15)
    np.testing.assert_allclose(s.collateral[0], 19 + 1 + 0.2 * wt - 0.5, rtol=1e-6)  # deposit, bonus; agent 0 waited
    np.testing.assert_allclose(s.collateral[1], 19.5 + 0.2 * wt, rtol=1e-6)
    expected_trust = 1 - 0.5 * (1 - 0.2 * wt)
    np.testing.assert_allclose([s.trust[0, 1], s.trust[1, 0]], expected_trust, rtol=1e-6)
    assert not bool(s.proposals.active[0, 1])
    assert list(np.asarray(s.last_trade_step)[:2]) == [1, 1]
    assert bool(s.last_outcome[0, O.TRADE_DONE]) and bool(s.last_outcome[1, O.TRADE_DONE])
    assert (K.TRADE, 0, 1) in ledger_events(s)


def test_accept_on_last_step_of_ttl_then_expiry(nexus):
    _, s, _, _, _ = nexus.step(nexus.state0, acts(a0=propose(1, 10, 5)))
    for _ in range(2):
        _, s, _, _, _ = nexus.step(s, acts())
    _, late, _, _, info = nexus.step(s, acts(a1=accept(0)))  # step 3 = t + ttl: still live
    assert int(info["error_code"][1]) == E.OK
    _, s, _, _, _ = nexus.step(s, acts())  # step 3 without accepting
    _, gone, _, _, info = nexus.step(s, acts(a1=accept(0)))  # step 4: expired first
    assert int(info["error_code"][1]) == E.NO_PROPOSAL
    assert not bool(gone.proposals.active[0, 1])
    np.testing.assert_allclose(gone.escrow[0], 0.0)
    np.testing.assert_allclose(gone.available[0, 0], 50.0)  # escrow returned
    assert bool(gone.last_outcome[0, O.MY_PROPOSAL_EXPIRED])
    assert (K.EXPIRY, 0, 1) in ledger_events(gone)


def test_reject_returns_escrow_minus_penalty_and_drops_trust(nexus):
    _, s1, _, _, _ = nexus.step(nexus.state0, acts(a0=propose(1, 10, 5)))
    _, s, _, _, info = nexus.step(s1, acts(a1=reject(0)))
    assert int(info["error_code"][1]) == E.OK
    np.testing.assert_allclose(s.available[0, 0], 50.0)
    np.testing.assert_allclose(s.escrow[0], 0.0)
    np.testing.assert_allclose(s.collateral[0], 19 + 1 - 0.1 - 0.5, rtol=1e-6)  # agent 0 waited
    np.testing.assert_allclose(s.collateral[1], 19.5)  # REJECT is not WAIT
    np.testing.assert_allclose(s.trust[1, 0], 0.5 * (1 - 0.02), rtol=1e-6)
    np.testing.assert_allclose(s.trust[0, 1], 0.5)
    assert bool(s.last_outcome[0, O.MY_PROPOSAL_REJECTED])
    assert (K.REJECT, 1, 0) in ledger_events(s)


def test_work_converts_and_grants_five_steps_of_immunity(nexus):
    _, s, _, _, _ = nexus.step(nexus.state0, acts(a0=(T.WORK, 0, 0, 0, 0)))
    np.testing.assert_allclose(s.available[0], [45, 52])
    assert int(s.tax_immunity[0]) == 5
    for _ in range(4):  # steps 1..4 shielded
        _, s, _, _, _ = nexus.step(s, acts())
    np.testing.assert_allclose(s.collateral[0], 20.0)
    _, s, _, _, _ = nexus.step(s, acts())  # step 5 pays again
    np.testing.assert_allclose(s.collateral[0], 19.5)


def test_vault_and_unvault_after_delay(nexus):
    _, s, _, _, _ = nexus.step(nexus.state0, acts(a0=(T.VAULT, 0, lv(10), 0, 0)))
    np.testing.assert_allclose(s.available[0, 0], 40.0)
    np.testing.assert_allclose(s.vault[0, 0], 10.0)
    _, s, _, _, _ = nexus.step(s, acts(a0=(T.UNVAULT, 0, lv(10), 0, 0)))  # step 1: arrives at step 4
    np.testing.assert_allclose(s.vault[0, 0], 0.0)
    np.testing.assert_allclose(s.withdrawals[0].sum(0), [10, 0])
    for _ in range(2):
        _, s, _, _, _ = nexus.step(s, acts())
    np.testing.assert_allclose(s.available[0, 0], 40.0)  # after step 3: still in flight
    _, s, _, _, _ = nexus.step(s, acts())
    np.testing.assert_allclose(s.available[0, 0], 50.0)  # step 4
    np.testing.assert_allclose(s.withdrawals, 0.0)


def test_vault_shaping_moves_when_the_hedge_pays_not_the_return(nexus):
    """vault_shaping=1 (opt-in): VAULT costs no utility in the step's reward, whatever is still held back is
    charged on the episode's last step (or over the last `vault_shaping_ramp` steps), and the episode's
    return is SPEC's to float precision."""
    plan = [(T.VAULT, 0, lv(10), 0, 0), (T.VAULT, 0, lv(10), 0, 1), (T.UNVAULT, 0, lv(10), 0, 0)] + [WAIT] * 3
    rewards = {}
    for shaping, ramp in ((0.0, 0), (1.0, 0), (1.0, 2)):
        params = nexus.params.replace(max_steps=np.int32(len(plan)), vault_shaping=np.float32(shaping),
                                      vault_shaping_ramp=np.int32(ramp))
        s, out = nexus.state0, []
        for a0 in plan:
            _, s, r, done, _ = nexus.step(s, acts(a0=a0), params=params)
            out.append(np.asarray(r))
        assert bool(done)
        rewards[shaping, ramp] = np.stack(out)
    plain, shaped, ramped = rewards[0.0, 0], rewards[1.0, 0], rewards[1.0, 2]
    _, _, r_wait, _, _ = nexus.step(nexus.state0, acts())
    np.testing.assert_allclose(shaped[0], r_wait, rtol=1e-6)  # VAULT 10 E: the same as everyone waiting
    np.testing.assert_allclose(plain[0] - shaped[0], 0.7 * -10, rtol=1e-6)  # SPEC: the hedge's cost now
    np.testing.assert_allclose(shaped[-1] - plain[-1], 0.7 * -10, rtol=1e-5)  # 10 C never came back
    np.testing.assert_allclose(ramped[-2:] - plain[-2:], 0.7 * -5, rtol=1e-5)  # ... charged over the last 2 steps
    for r in (shaped, ramped):
        np.testing.assert_allclose(r.sum(0), plain.sum(0), rtol=1e-5)


def test_signal_honoured_then_trust_gain_multiplied(nexus):
    _, s, _, _, _ = nexus.step(nexus.state0, acts(a0=signal(1, 10, 5)))
    assert bool(s.signals.active[0, 1])
    assert (K.SIGNAL, 0, 1) in ledger_events(s)
    _, s, _, _, _ = nexus.step(s, acts(a0=propose(1, 10, 5)))
    assert not bool(s.signals.active[0, 1]) and bool(s.signals.trust_bonus[0, 1])
    np.testing.assert_allclose(s.collateral[0], 20 - 1 + 0.5)  # deposit, honour bonus
    assert (K.HONOURED, 0, 1) in ledger_events(s)
    _, s, _, _, _ = nexus.step(s, acts(a1=accept(0)))
    a = 0.2 * w(15)
    np.testing.assert_allclose(s.trust[1, 0], 1 - 0.5 * (1 - 1.5 * a), rtol=1e-6)  # target's trust in signaller
    np.testing.assert_allclose(s.trust[0, 1], 1 - 0.5 * (1 - a), rtol=1e-6)
    assert not bool(s.signals.trust_bonus[0, 1])  # consumed


@pytest.mark.parametrize("shocked", [False, True])
def test_signal_broken_is_punished_and_marked(nexus, shocked):
    _, s, _, _, _ = nexus.step(nexus.state0, acts(a0=signal(1, 40, 20)))
    for t in range(1, 6):
        _, s, _, _, _ = nexus.step(s, acts(), noise=FLARE if (shocked and t == 1) else NO_SHOCK)
    assert bool(s.signals.active[0, 1]) and bool(s.signals.shock_hit[0, 1]) == shocked
    coll_before = float(s.collateral[0])
    _, s, _, _, _ = nexus.step(s, acts())  # step 6: window passed
    assert not bool(s.signals.active[0, 1])
    np.testing.assert_allclose(s.collateral[0], coll_before - 0.5 - 2.0, rtol=1e-6)
    np.testing.assert_allclose(s.trust[1, 0], 0.5 * (1 - 1.5 * 0.2) * (1 - 0.05), rtol=1e-6)
    t20 = 0.5 * (1 - 0.05)
    np.testing.assert_allclose(s.trust[2, 0], t20 + 0.01 * (0.5 - t20), rtol=1e-6)  # public drop, then decay
    kind = K.FORCE_MAJEURE if shocked else K.BROKEN
    assert (kind, 0, 1) in ledger_events(s)
    assert bool(s.last_outcome[0, O.SIGNAL_BROKEN])


@pytest.mark.parametrize("case", ["never_held", "spent_before_shock"])
def test_signal_broken_after_a_shock_is_malicious_unless_the_shock_caused_it(nexus, case):
    """FORCE_MAJEURE only when the signaller held the promised amount right before the shock."""
    if case == "never_held":  # ALTRUIST holds 10 E and promises 20 E
        seat, first, second = 2, signal(1, 20, 5), WAIT
    else:  # LEARNER holds 50 E, promises 40 E, then vaults 20 of it (30 E left) before the flare
        seat, first, second = 0, signal(1, 40, 20), (T.VAULT, 0, lv(20), 0, 0)
    _, s, _, _, _ = nexus.step(nexus.state0, acts(**{f"a{seat}": first}))
    _, s, _, _, _ = nexus.step(s, acts(**{f"a{seat}": second}))
    _, s, _, _, info = nexus.step(s, acts(), noise=FLARE)
    assert float(info["flows"]["shock_loss"][seat, 0]) > 0  # the shock did hit the signaller's Energy
    assert not bool(s.signals.shock_hit[seat, 1])
    for _ in range(4):
        _, s, _, _, info = nexus.step(s, acts())
    assert bool(info["stats"]["signals_broken"][seat, 1]) and not bool(info["stats"]["broken_force_majeure"][seat, 1])
    assert (K.BROKEN, seat, 1) in ledger_events(s) and (K.FORCE_MAJEURE, seat, 1) not in ledger_events(s)


def test_open_signals_are_visible_to_every_seat(nexus):
    """A third party (seat 3) sees seat 0's open signal to seat 1 in its observation."""
    layout = observation_layout(nexus.params)
    obs, s, _, _, _ = nexus.step(nexus.state0, acts(a0=signal(1, 10, 5), a2=signal(0, 20, 5, r=1)))
    obs, s, _, _, _ = nexus.step(s, acts())
    block = np.asarray(obs[:, layout["open_signals"]]).reshape(4, 4, 5)  # [observer, seat, feature]
    np.testing.assert_array_equal(block, np.broadcast_to(block[3], block.shape))  # the same for every observer
    expected = np.zeros((4, 5), np.float32)
    expected[0] = [1 / 3, 0.10, 0.0, 1 / 5, 1 / 3]  # made one (10 E), age 1 of 5, received one (from 2)
    expected[1] = [0.0, 0.0, 0.0, 0.0, 1 / 3]
    expected[2] = [1 / 3, 0.0, 0.20, 1 / 5, 0.0]
    np.testing.assert_allclose(block[3], expected, rtol=1e-6)
    # Seat 3 is party to neither signal: its pair blocks are empty, the public block is not.
    assert not np.asarray(obs[3, layout["incoming_signals"]]).any() and not np.asarray(obs[3, layout["outgoing_signals"]]).any()


@pytest.mark.parametrize("legacy", [False, True])
def test_patience_rule_charges_vault_churn_unless_immune(nexus, legacy):
    """Default: VAULT and UNVAULT pay the wait cost like WAIT (shuffling is passive holding); trading
    actions do not; WORK's immunity lifts it. `wait_cost_types=(1, 0, ...)` restores the old rule."""
    params = nexus.params.replace(wait_cost_types=np.asarray((1.0,) + (0.0,) * 7, np.float32)) if legacy else None
    _, s, _, _, _ = nexus.step(nexus.state0, acts(a0=(T.VAULT, 0, lv(1), 0, 0), a1=propose(0, 5, 5)), params=params)
    _, s, _, _, _ = nexus.step(s, acts(a0=(T.UNVAULT, 0, lv(1), 0, 0), a1=WAIT), params=params)
    churn = 0.0 if legacy else 1.0
    np.testing.assert_allclose(s.collateral[0], 20.0 - churn, rtol=1e-6)
    np.testing.assert_allclose(s.collateral[1], 20.0 - 1.0 - 0.5, rtol=1e-6)  # deposit, then one WAIT
    _, s, _, _, _ = nexus.step(s, acts(a0=(T.WORK, 0, 0, 0, 0)), params=params)
    coll = float(s.collateral[0])
    _, s, _, _, _ = nexus.step(s, acts(a0=(T.VAULT, 0, lv(1), 0, 0)), params=params)
    np.testing.assert_allclose(s.collateral[0], coll)  # immune


def test_proposals_to_each_other_coexist(nexus):
    _, s, _, _, info = nexus.step(nexus.state0, acts(a0=propose(1, 10, 5), a1=propose(0, 5, 10, r=1)))
    assert list(np.asarray(info["error_code"])) == [0, 0, 0, 0]
    assert bool(s.proposals.active[0, 1]) and bool(s.proposals.active[1, 0])
    np.testing.assert_allclose(s.escrow[:2], [[10, 0], [0, 5]])


def test_accept_settles_before_same_step_shock(nexus):
    _, s1, _, _, _ = nexus.step(nexus.state0, acts(a0=propose(1, 10, 5)))
    _, s, _, _, info = nexus.step(s1, acts(a1=accept(0)), noise=FLARE)
    assert bool(info["stats"]["trades"][0, 1]) and bool(info["stats"]["shock_started"])
    events = [e[0] for e in ledger_events(s)]
    assert events.index(K.TRADE) < events.index(K.SHOCK)
    assert int(s.shock_kind) == 1 and int(s.shock_remaining) == 1
    # The trade's Energy reached the acceptor before the flare took its share of it.
    pre_shock_e = 91 + 10 + 2 - 1
    assert float(s.available[1, 0]) < pre_shock_e
    np.testing.assert_allclose(info["flows"]["shock_loss"][1, 0], pre_shock_e - float(s.available[1, 0]), rtol=1e-5)


def test_shock_that_reaches_escrow_voids_the_proposal(nexus):
    # ALTRUIST locks all its 10 E, so a flare in the same step must take from escrow.
    _, s, _, _, info = nexus.step(nexus.state0, acts(a2=propose(0, 10, 5)), noise=FLARE)
    assert not bool(s.proposals.active[2, 0])
    assert bool(info["stats"]["voided"][2, 0])
    np.testing.assert_allclose(s.escrow[2], 0.0)
    np.testing.assert_allclose(s.available[2, 0], 10 * (1 - 0.2), rtol=1e-5)  # X=10 below mean: 20% loss
    np.testing.assert_allclose(s.collateral[2], 20.0)  # deposit returned
    assert (K.FORCE_MAJEURE, 2, 0) in ledger_events(s)
    assert bool(s.last_outcome[2, O.MY_PROPOSAL_VOIDED])


def test_richer_agents_lose_a_larger_share(nexus):
    _, s, _, _, info = nexus.step(nexus.state0, acts(), noise=FLARE)
    loss = np.asarray(info["flows"]["shock_loss"][:, 0])
    x = np.array([50.0, 91.0, 9.0, 40.0])  # Energy after income and upkeep
    frac = np.minimum(0.2 * (1 + 0.5 * np.maximum(0, x / x.mean() - 1)), 0.5)
    np.testing.assert_allclose(loss, frac * x, rtol=1e-5)
    assert loss[1] / x[1] > loss[0] / x[0] > 0


def test_resolution_order_accept_before_replacement(nexus):
    _, s1, _, _, _ = nexus.step(nexus.state0, acts(a0=propose(1, 10, 5)))
    _, s, _, _, info = nexus.step(s1, acts(a0=propose(1, 20, 10), a1=accept(0)))
    assert bool(info["stats"]["trades"][0, 1])
    np.testing.assert_allclose(info["stats"]["trade_volume"][0, 1], 15.0)  # old terms settled
    assert bool(s.proposals.active[0, 1]) and float(s.proposals.give[0, 1]) == 20  # new one pending
    np.testing.assert_allclose(s.escrow[0], [20, 0])
    np.testing.assert_allclose(s.available[0], [20, 55])


def test_starving_and_isolation_decay(nexus):
    s = nexus.state0
    for _ in range(10):  # steps 0..9
        _, s, _, _, _ = nexus.step(s, acts())
    np.testing.assert_allclose(s.available[0], [50, 50])
    np.testing.assert_allclose(s.available[1, 1], 0.0)  # BULLY has eaten its Compute
    _, s, _, _, info = nexus.step(s, acts())  # step 10: isolated since step 0
    np.testing.assert_allclose(s.available[0], [49.5, 49.5], rtol=1e-6)
    assert bool(info["stats"]["starving"][1]) and not bool(info["stats"]["starving"][0])
    assert float(s.available.min()) >= 0.0
    assert bool(s.last_outcome[1, O.STARVING])


def test_trust_decays_toward_half_without_interaction(nexus):
    state = nexus.state0.replace(trust=nexus.state0.trust.at[0, 1].set(0.9).at[2, 3].set(0.1))
    _, s, _, _, _ = nexus.step(state, acts())
    np.testing.assert_allclose(s.trust[0, 1], 0.9 + 0.01 * (0.5 - 0.9), rtol=1e-6)
    np.testing.assert_allclose(s.trust[2, 3], 0.1 + 0.01 * (0.5 - 0.1), rtol=1e-6)


def test_credit_limit_follows_reputation(nexus):
    big = propose(1, 40, 20)  # volume 60 > 20 + 60 * 0.5
    _, _, _, _, info = nexus.step(nexus.state0, acts(a0=big))
    assert int(info["error_code"][0]) == E.CREDIT_LIMIT
    trusted = nexus.state0.replace(trust=nexus.state0.trust.at[:, 0].set(0.9))  # rep 0.9 -> limit 74
    _, _, _, _, info = nexus.step(trusted, acts(a0=big))
    assert int(info["error_code"][0]) == E.OK


def test_invalid_actions_become_wait_with_penalty_and_code(nexus):
    cases = [
        acts(a0=(99, 0, 0, 0, 0), a1=propose(1, 5, 5), a2=propose(9, 5, 5), a3=(T.PROPOSE, 0, 9, 0, 0)),
        acts(a0=propose(1, 0, 0), a1=propose(0, 20, 0, r=1), a2=accept(0), a3=reject(2)),
        acts(a0=(T.VAULT, 0, 0, 0, 0), a1=(T.UNVAULT, 0, lv(5), 0, 0), a2=(T.WORK, 0, 0, 0, 0), a3=(T.WORK, 0, 0, 0, 7)),
    ]
    expected = [
        [E.BAD_TYPE, E.SELF_TARGET, E.BAD_TARGET, E.BAD_AMOUNT],
        [E.EMPTY_TRADE, E.INSUFFICIENT_RESOURCE, E.NO_PROPOSAL, E.NO_PROPOSAL],
        [E.EMPTY_TRADE, E.INSUFFICIENT_RESOURCE, E.OK, E.BAD_AMOUNT],
    ]
    layout = observation_layout(nexus.params)
    for case, codes in zip(cases, expected):
        obs, s, r, _, info = nexus.step(nexus.state0, case)
        assert [int(c) for c in info["error_code"]] == [int(c) for c in codes]
        bad = np.array([c != E.OK for c in codes])
        np.testing.assert_array_equal(info["invalid"], bad)
        np.testing.assert_allclose(np.asarray(s.collateral)[bad], 19.5)  # charged as WAIT
        np.testing.assert_array_equal(np.argmax(obs[:, layout["last_error"]], 1), [int(c) for c in codes])
        # Same state, same shared dU: an invalid agent's reward is exactly invalid_penalty lower
        # than if it had waited.
        _, _, r_wait, _, _ = nexus.step(nexus.state0, [WAIT if b else a for a, b in zip(case, bad)])
        np.testing.assert_allclose(np.asarray(r_wait - r)[bad], 1.0, rtol=1e-5)
        np.testing.assert_allclose(np.asarray(s.available), np.asarray(nexus.step(nexus.state0, [WAIT if b else a for a, b in zip(case, bad)])[1].available))


def test_insufficient_collateral_and_pending_signal(nexus):
    poor = nexus.state0.replace(collateral=nexus.state0.collateral.at[0].set(0.5))
    _, _, _, _, info = nexus.step(poor, acts(a0=propose(1, 5, 5)))
    assert int(info["error_code"][0]) == E.INSUFFICIENT_COLLATERAL
    _, s, _, _, _ = nexus.step(nexus.state0, acts(a0=signal(1, 5, 5)))
    _, _, _, _, info = nexus.step(s, acts(a0=signal(1, 10, 5)))
    assert int(info["error_code"][0]) == E.SIGNAL_PENDING


def test_ledger_ring_keeps_the_newest_events():
    from conftest import Nexus

    small = Nexus(ledger_size=4, obs_ledger_events=4)
    s = small.state0
    _, s, _, _, _ = small.step(s, [propose(1, 5, 5), propose(0, 2, 5, r=1), propose(3, 5, 5, r=1), propose(2, 5, 5)])
    _, s, _, _, _ = small.step(s, [accept(1), accept(0), accept(3), accept(2)])
    assert int(s.ledger.count) == 8
    assert ledger_events(s) == [(K.TRADE, 0, 1), (K.TRADE, 1, 0), (K.TRADE, 2, 3), (K.TRADE, 3, 2)]


@settings(max_examples=40, deadline=None)
@given(held=st.floats(0.0, 80.0, width=32), give=st.sampled_from([1.0, 2.0, 5.0, 10.0, 20.0, 40.0]))
def test_force_majeure_iff_the_shock_took_the_signaller_below_its_promise(nexus, held, give):
    """Property: a signal is marked shock-hit by a flare exactly when its signaller's available Energy was
    >= the promised give before the loss and < it after (the same step without the shock gives "before")."""
    s0 = nexus.state0.replace(available=nexus.state0.available.at[0, 0].set(held))
    _, s, _, _, _ = nexus.step(s0, acts(a0=signal(1, give, 5)))
    before = float(nexus.step(s, acts())[1].available[0, 0])
    _, hit, _, _, _ = nexus.step(s, acts(), noise=FLARE)
    after = float(hit.available[0, 0])
    assert after < before or before == 0.0  # the flare did take Energy
    assert bool(hit.signals.shock_hit[0, 1]) == (before >= give > after)


@pytest.mark.parametrize("m", [13, 97, 345, 5000])  # one, two (the grid), three and four levels of the rank tree
def test_ledger_append_writes_the_valid_events_in_order_at_every_size(m):
    """`ledger.append` against the ring written one event at a time, for candidate counts whose rank tree
    has one to four levels (N = 64's 20,673 candidates have four), sparse, dense and overflowing, the
    candidates arriving in three batches."""
    size, rng = 32, np.random.default_rng(m)
    cuts = [0, m // 3, m // 2, m]  # three batches of events, as core.step's phases hand them over

    def batches(valid):
        return [make_events(valid[lo:hi], K.TRADE, np.arange(lo, hi), 1, np.arange(lo, hi) * 0.5, 0.0, 0)
                for lo, hi in zip(cuts, cuts[1:])]

    run = jax.jit(lambda led, valid: append(led, batches(valid), 7))
    for density in (0.0, 0.004, 0.05, 1.0):
        head = int(rng.integers(size))
        valid = rng.random(m) < density
        out = run(empty_ledger(size).replace(head=np.int32(head), count=np.int32(3)), valid)
        actor = np.zeros(size, np.int64)
        for k, event in enumerate(np.flatnonzero(valid)):
            actor[(head + k) % size] = event
        written = np.zeros(size, bool)
        written[(head + np.arange(min(valid.sum(), size))) % size] = True
        if valid.sum() > size:  # the oldest were overwritten: the newest 32 remain
            written[:] = True
        np.testing.assert_array_equal(np.asarray(out.actor)[written], actor[written])
        np.testing.assert_array_equal(np.asarray(out.amount_1)[written], actor[written] * 0.5)
        assert (np.asarray(out.step)[written] == 7).all() and (np.asarray(out.step)[~written] == 0).all()
        assert int(out.head) == (head + valid.sum()) % size and int(out.count) == 3 + valid.sum()


# ---- nexus-v1's rules (each a params field whose v0 value is the rule above) ------------------------------
def test_reward_level_pays_the_utility_held(nexus):
    """reward_utility "level": the utility term is U / max_steps (own: the seat's), not its change."""
    level = nexus.params.replace(reward_utility=np.int32(1), reward_mode=np.int32(1))
    _, s, r, _, _ = nexus.step(nexus.state0, acts(), params=level)
    u = np.array([50.0, 9.0, 9.0, 40.0])  # after income and upkeep (the first test's holdings)
    np.testing.assert_allclose(r, 0.7 * u / 100 + 0.2 * -0.5, rtol=1e-6)


@pytest.mark.parametrize("give, fair", [(10, True), (5, False), (2, False)])
def test_an_unfair_trade_costs_the_acceptors_trust(nexus, give, fair):
    """trust_fair_ratio 0.8: 10 E for 10 C raises both trusts; 5 (or 2) E for 10 C raises the proposer's and moves the
    acceptor's toward 0 at alpha x weight x (1 - give / (0.8 x want))."""
    rules = nexus.params.replace(trust_fair_ratio=np.float32(0.8))
    _, s1, _, _, _ = nexus.step(nexus.state0, acts(a0=propose(2, give, 10)), params=rules)
    _, s, _, _, _ = nexus.step(s1, acts(a2=accept(0)), params=rules)
    wt = w(give + 10)
    up = 1 - 0.5 * (1 - 0.2 * wt)
    np.testing.assert_allclose(s.trust[0, 2], up, rtol=1e-6)  # the proposer got its terms
    expected = up if fair else 0.5 * (1 - 0.2 * wt * (1 - give / 8.0))
    np.testing.assert_allclose(s.trust[2, 0], expected, rtol=1e-6)


def test_a_local_shock_hits_only_the_seats_it_reaches(nexus):
    """shock_reach 0.5: the seats whose reach uniform is below it lose their share; the others lose nothing."""
    rules = nexus.params.replace(shock_reach=np.float32(0.5))
    noise = FLARE._replace(reach_u=jax.numpy.asarray([0.1, 0.9, 0.4, 0.6], jax.numpy.float32))
    _, s, _, _, info = nexus.step(nexus.state0, acts(), noise=noise, params=rules)
    loss = np.asarray(info["flows"]["shock_loss"][:, 0])
    assert loss[0] > 0 and loss[2] > 0 and loss[1] == 0 and loss[3] == 0
    np.testing.assert_allclose(s.available[[1, 3], 0], [91.0, 40.0])


PREPAY = NexusParams.create(num_agents=4, endowment_jitter=0.0, signal_prepay=1)


def test_prepay_on_a_signal_then_the_honouring_proposal_delivers_at_once(nexus):
    """signal_prepay: B's ACCEPT of A's open signal (no proposal live) pays its want ahead; A's honouring PROPOSE
    then moves the give at once, a trade with no proposal left live."""
    _, s0, _, _, _ = nexus.step(nexus.state0, acts(a0=signal(1, 10, 5)), params=PREPAY)
    _, waited, _, _, _ = nexus.step(s0, acts(), params=PREPAY)
    obs, s, _, _, info = nexus.step(s0, acts(a1=accept(0)), params=PREPAY)
    assert int(info["error_code"][1]) == E.OK and bool(s.signals.prepaid[0, 1]) and bool(s.signals.active[0, 1])
    np.testing.assert_allclose(s.available - waited.available, [[0, 5], [0, -5], [0, 0], [0, 0]], atol=1e-5)
    incoming = observation_layout(PREPAY)["incoming_signals"]
    assert float(obs[1, incoming][0 * 5 + 2]) == 0.0  # seat 1 owes seat 0 nothing more
    assert float(obs[1, incoming][0 * 5 + 1]) > 0.0  # and is still owed the give
    # paying twice is refused: the signal is paid
    _, _, _, _, again = nexus.step(s, acts(a1=accept(0)), params=PREPAY)
    assert int(again["error_code"][1]) == E.NO_PROPOSAL
    _, honoured, _, _, info = nexus.step(s, acts(a0=propose(1, 10, 5)), params=PREPAY)
    _, waited, _, _, _ = nexus.step(s, acts(), params=PREPAY)
    np.testing.assert_allclose(honoured.available - waited.available, [[-10, 0], [10, 0], [0, 0], [0, 0]], atol=1e-5)
    assert not bool(honoured.proposals.active[0, 1]) and not bool(honoured.signals.active[0, 1])
    assert bool(info["stats"]["trades"][0, 1]) and float(honoured.escrow.sum()) == 0.0
    assert (K.TRADE, 0, 1) in ledger_events(honoured) and (K.HONOURED, 0, 1) in ledger_events(honoured)
    assert float(honoured.trust[1, 0]) > float(waited.trust[1, 0]) and float(honoured.trust[0, 1]) > float(waited.trust[0, 1])


def test_a_broken_prepaid_signal_keeps_the_payment(nexus):
    """ALTRUIST seat 2 pays 5 Compute ahead on seat 0's signal; seat 0 never honours: the payment stays with seat 0
    (against the same steps without it; isolation decay shrinks the difference by at most 1 - 0.98^6)."""
    _, s0, _, _, _ = nexus.step(nexus.state0, acts(a0=signal(2, 10, 5)), params=PREPAY)
    paths = []
    for first in (acts(a2=accept(0)), acts()):
        _, s, _, _, _ = nexus.step(s0, first, params=PREPAY)
        for _ in range(5):
            _, s, _, _, _ = nexus.step(s, acts(), params=PREPAY)
        paths.append(s)
    paid, unpaid = paths
    assert not bool(paid.signals.active[0, 2]) and not bool(paid.signals.prepaid[0, 2])
    assert (K.BROKEN, 0, 2) in ledger_events(paid)
    diff = np.asarray(paid.available - unpaid.available)
    assert 4.4 < diff[0, 1] <= 5.0 + 1e-5 and -5.0 - 1e-5 <= diff[2, 1] < -4.4, diff
    np.testing.assert_allclose(diff[:, 0], 0.0, atol=1e-5)


def test_without_the_rule_an_accept_needs_a_proposal(nexus):
    """nexus-v0 and nexus-v1 (signal_prepay 0): an ACCEPT naming an open signal and no proposal is NO_PROPOSAL."""
    _, s, _, _, _ = nexus.step(nexus.state0, acts(a0=signal(1, 10, 5)))
    _, s2, _, _, info = nexus.step(s, acts(a1=accept(0)))
    assert int(info["error_code"][1]) == E.NO_PROPOSAL and not bool(s2.signals.prepaid[0, 1])

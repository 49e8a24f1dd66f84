"""The research scenarios (nexus-research-*-v0): registered, params only, rules as documented."""
import jax
import numpy as np
import pytest

import nexus_jax
from nexus_jax.envs.nexus import Archetype
from nexus_jax.envs.nexus import ATTRIBUTION_RULES, HIDDEN_TYPES, KEPT_PROMISES, PROMISE_RULES, RESEARCH_RULES
from nexus_jax.envs.nexus import core
from nexus_jax.envs.nexus.npc.archetypes import behaviour_ids, traits

# docs/research.md: the cheater mix under these rules; every other field as nexus-cheater-v0.
DOCUMENTED = {"p_grid_failure": 0.05, "shock_severity": 0.05, "shock_progressive": 15.0, "shock_max_fraction": 0.9,
              "trade_collateral_bonus": 4.0, "reward_mode": 1}


def fields(params):
    return {k: np.asarray(v) for k, v in vars(params).items() if v is not None}


def test_research_variant_differs_from_the_cheater_mix_only_in_the_documented_rules():
    research = nexus_jax.make("nexus-research-v0")
    cheater = nexus_jax.make("nexus-cheater-v0")
    assert RESEARCH_RULES == DOCUMENTED
    assert research.learner_seats == (0,)
    a, b = fields(research.default_params), fields(cheater.default_params)
    differ = {k for k in a if not np.array_equal(a[k], b[k])}
    assert differ == set(DOCUMENTED)
    for k, v in DOCUMENTED.items():
        np.testing.assert_allclose(a[k], v)
    assert np.asarray(research.default_params.archetypes).tolist() == [int(x) for x in (
        Archetype.LEARNER, Archetype.CHEATER, Archetype.RECIPROCATOR, Archetype.ALTRUIST)]


@pytest.mark.parametrize("selfplay, single", [("nexus-research-selfplay-v0", "nexus-research-v0"),
                                             ("nexus-research-promises-selfplay-v0", "nexus-research-promises-v0"),
                                             ("nexus-research-hidden-selfplay-v0", "nexus-research-hidden-v0")])
def test_research_selfplay_has_every_seat_a_learner_under_the_same_rules(selfplay, single):
    sp = nexus_jax.make(selfplay)
    research = nexus_jax.make(single)
    assert sp.learner_seats == (0, 1, 2, 3)
    a, b = fields(sp.default_params), fields(research.default_params)
    assert {k for k in a if not np.array_equal(a[k], b[k])} == set()


def test_attribution_variant_adds_only_its_documented_rules_to_the_research_scenario():
    att, research = nexus_jax.make("nexus-research-attribution-v0"), nexus_jax.make("nexus-research-v0")
    assert set(ATTRIBUTION_RULES) == {"obs_ledger_events", "npc_signal_rate", "npc_accept_min_ratio", "npc_offer_ratio"}
    assert att.default_params.obs_ledger_events == 32 and research.default_params.obs_ledger_events == 8
    a, b = fields(att.default_params), fields(research.default_params)
    assert {k for k in a if not np.array_equal(a[k], b[k])} == set(ATTRIBUTION_RULES)
    cheater, reciprocator = int(Archetype.CHEATER), int(Archetype.RECIPROCATOR)
    assert a["npc_accept_min_ratio"][cheater] == 2.0 and a["npc_offer_ratio"][cheater] == 0.5
    assert a["npc_signal_rate"][reciprocator] == a["npc_signal_rate"][cheater] == 0.5


def test_promises_variant_adds_only_its_documented_rules_to_the_research_scenario():
    prom, research = nexus_jax.make("nexus-research-promises-v0"), nexus_jax.make("nexus-research-v0")
    assert set(PROMISE_RULES) == set(KEPT_PROMISES) | {"shock_severity", "shock_progressive", "shock_max_fraction",
                                                       "obs_ledger_events"}
    a, b = fields(prom.default_params), fields(research.default_params)
    assert {k for k in a if not np.array_equal(a[k], b[k])} == set(PROMISE_RULES)
    honest = [int(x) for x in (Archetype.ALTRUIST, Archetype.TIT_FOR_TAT, Archetype.RECIPROCATOR)]
    cheater = int(Archetype.CHEATER)
    assert (a["npc_honour_delay"][honest] == 4).all() and a["npc_honour_delay"][cheater] == 0
    assert a["npc_signal_rate"][cheater] < a["npc_signal_rate"][int(Archetype.RECIPROCATOR)]


def test_hidden_variant_adds_only_its_documented_rules_to_the_promises_variant():
    hidden, prom = nexus_jax.make("nexus-research-hidden-v0"), nexus_jax.make("nexus-research-promises-v0")
    assert set(HIDDEN_TYPES) == {"behaviour_shuffle", "npc_accept_min_give", "trade_collateral_bonus"}
    a, b = fields(hidden.default_params), fields(prom.default_params)
    assert {k for k in a if not np.array_equal(a[k], b[k])} == set(HIDDEN_TYPES)
    cheater = int(Archetype.CHEATER)
    assert a["behaviour_shuffle"].tolist() == [0, 1, 1, 1] and b["behaviour_shuffle"].tolist() == [0, 0, 0, 0]
    assert a["npc_accept_min_give"][cheater] > max(hidden.default_params.amount_grid)  # it accepts nothing
    assert float(a["trade_collateral_bonus"]) == 8.0
    others = [i for i in range(len(Archetype)) if i != cheater]
    np.testing.assert_array_equal(a["npc_accept_min_give"][others], b["npc_accept_min_give"][others])


def test_behaviour_shuffle_deals_the_marked_seats_behaviours_and_keeps_the_rest():
    keys = jax.random.split(jax.random.PRNGKey(0), 600)
    plain = nexus_jax.make("nexus-research-promises-v0").default_params
    ident = np.asarray(jax.vmap(lambda k: core.draw_behaviour_seats(k, plain))(keys))
    assert (ident == np.arange(4)).all()  # the default: every seat plays its own behaviour
    p = nexus_jax.make("nexus-research-hidden-v0").default_params
    seats = np.asarray(jax.vmap(lambda k: core.draw_behaviour_seats(k, p))(keys))
    assert (seats[:, 0] == 0).all() and (np.sort(seats[:, 1:], 1) == [1, 2, 3]).all()
    assert len({tuple(r) for r in seats}) == 6  # every deal of the three behaviours occurs
    # the jitter is drawn as before: the same key gives the same endowments with and without the deal
    _, s_plain = core.reset(keys[0], plain)
    _, s_hidden = core.reset(keys[0], p)
    np.testing.assert_array_equal(np.asarray(s_plain.available), np.asarray(s_hidden.available))
    assert np.asarray(s_plain.behaviour_seat).tolist() == [0, 1, 2, 3]
    # the NPC policy and the memory read the dealt behaviour: the CHEATER's break rate moves with it
    k = next(k for k, r in zip(keys, seats) if r[3] == 1)  # the CHEATER (seat 1's behaviour) dealt to seat 3
    _, state = core.reset(k, p)
    rate = np.asarray(traits(p, behaviour_ids(state, p.behaviours)).break_rate)
    assert rate[3] == 0.5 and rate[1] == 0.0 and rate[0] == 0.0
    mask = p.behaviour_shuffle.at[3].set(0)  # a partial mask: only seats 1 and 2 swap
    both = np.asarray(jax.vmap(lambda kk: core.draw_behaviour_seats(kk, p.replace(behaviour_shuffle=mask)))(keys))
    assert {tuple(r) for r in both} == {(0, 1, 2, 3), (0, 2, 1, 3)}


@pytest.mark.slow
def test_hidden_selfplay_plays_as_the_promises_selfplay_with_the_bonus():
    """With every seat a learner no NPC param is read, so nexus-research-hidden-selfplay-v0 plays exactly as
    nexus-research-promises-selfplay-v0 with trade_collateral_bonus=8 (the run in docs/research.md was made so)."""
    a = nexus_jax.make("nexus-research-hidden-selfplay-v0")
    b = nexus_jax.make("nexus-research-promises-selfplay-v0", trade_collateral_bonus=8.0)

    def play(env):
        def body(st, k):
            acts = {ag: jax.random.randint(jax.random.fold_in(k, i), (), 0, env.num_actions)
                    for i, ag in enumerate(env.agents)}
            obs, st, rew, _, _ = env.step(jax.random.fold_in(k, 99), st, acts)
            return st, (obs["agent_0"], rew["agent_3"])
        _, st = env.reset(jax.random.PRNGKey(1))
        return jax.lax.scan(body, st, jax.random.split(jax.random.PRNGKey(2), 30))

    (sa, oa), (sb, ob) = play(a), play(b)
    for x, y in zip(jax.tree.leaves(((sa.replace(behaviour_seat=sb.behaviour_seat)), oa)), jax.tree.leaves((sb, ob))):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_reliance_variant_adds_only_the_reliance_rule_and_a_harder_cheater_to_the_hidden_variant():
    """nexus-research-reliance-v1 = nexus-research-hidden-v1 + signal_prepay + a CHEATER that signals every step and
    breaks every promise; its self-play twin has the same params."""
    rel, hidden = nexus_jax.make("nexus-research-reliance-v1"), nexus_jax.make("nexus-research-hidden-v1")
    a, b = fields(rel.default_params), fields(hidden.default_params)
    assert {k for k in a if not np.array_equal(a[k], b[k])} == {"signal_prepay", "npc_signal_rate", "npc_break_rate"}
    cheater = int(Archetype.CHEATER)
    assert int(a["signal_prepay"]) == 1 and int(b["signal_prepay"]) == 0
    assert a["npc_signal_rate"][cheater] == a["npc_break_rate"][cheater] == 1.0
    others = [i for i in range(len(a["npc_signal_rate"])) if i != cheater]
    np.testing.assert_array_equal(a["npc_signal_rate"][others], b["npc_signal_rate"][others])
    sp = nexus_jax.make("nexus-research-reliance-selfplay-v1")
    assert sp.learner_seats == (0, 1, 2, 3)
    c = fields(sp.default_params)
    assert {k for k in a if not np.array_equal(a[k], c[k])} == set()


def test_every_v1_id_has_a_v2_twin_that_differs_only_in_v2s_two_rules():
    """nexus-v2 = nexus-v1 + signal_prepay 1 + reject_penalty 1.0 (versions.V2_RULES), id for id; the seats stay."""
    v1_ids = [e for e in nexus_jax.registered_envs() if e.startswith("nexus") and e.endswith("-v1")]
    assert len(v1_ids) == 16 and nexus_jax.DEFAULT_ENV == "nexus-v2"
    for v1_id in v1_ids:
        one, two = nexus_jax.make(v1_id), nexus_jax.make(v1_id[:-1] + "2")
        a, b = fields(one.default_params), fields(two.default_params)
        changed = {k for k in a if not np.array_equal(a[k], b[k])}
        # the reliance variants switch signal_prepay on already on v1
        assert changed == ({"reject_penalty"} if "reliance" in v1_id else {"signal_prepay", "reject_penalty"}), v1_id
        assert int(b["signal_prepay"]) == 1 and float(b["reject_penalty"]) == 1.0
        assert one.learner_seats == two.learner_seats and one.agents == two.agents

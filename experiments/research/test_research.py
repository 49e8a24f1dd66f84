"""The research study's tools (experiments/research): the scripted evaluator, the break-label and intent counts, the traces,
and the attribution estimator validated on the env (a history-blind policy scores ~0, the RECIPROCATOR > 0)."""
import jax
import numpy as np
import pytest

from experiments.research.attribution_intent import break_counts
from experiments.research.cheater_value import make_pricer
from experiments.research.questions import (
    describe,
    make_scripted,
    paired,
    scripted_act,
    scripted_args,
    scripted_policy,
)
from experiments.research.trace import make_population_tracer, make_tracer, summarise
from nexus_jax.envs.nexus import Archetype
from train.learner_env import LearnerEnv

pytestmark = pytest.mark.slow  # a study's reproduction: the full tier (python -m pytest -m slow; CI runs it)


def test_promises_variant_labels_mostly_name_the_right_partner():
    """In nexus-research-promises-v0 a force-majeure break is mostly an honest partner's and a malicious break
    almost always the CHEATER's (in nexus-research-v0 both were the CHEATER's: docs/research.md)."""
    def counts(env_id):
        base = LearnerEnv.make(env_id, {"max_steps": 50})
        p = base.env.default_params
        arch = jax.numpy.int32(int(Archetype.RECIPROCATOR))
        return np.asarray(break_counts(base, 256)(p, arch, jax.numpy.bool_(False), jax.random.PRNGKey(3)))
    c = counts("nexus-research-promises-v0")  # [signaller, label (FM, malicious), intention]; seat 1 = CHEATER
    fm, mal = c[:, 0].sum(1), c[:, 1].sum(1)
    assert fm[2:].sum() > 2 * fm[1] and fm.sum() > 50, fm
    assert mal[1] > 20 * mal[2:].sum(), mal
    old = counts("nexus-research-v0")
    assert old[1, 0].sum() > 5 * old[2:, 0].sum()  # before: force majeure was the CHEATER's


def test_hidden_variant_spreads_the_cheaters_breaks_over_the_seats():
    """With the behaviours dealt per episode, malicious breaks come from every NPC seat (the CHEATER's seat
    varies), and force majeure is still mostly an honest partner's (the label stays informative)."""
    base = LearnerEnv.make("nexus-research-hidden-v0", {"max_steps": 50})
    p = base.env.default_params
    c = np.asarray(break_counts(base, 256)(p, jax.numpy.int32(int(Archetype.RECIPROCATOR)), jax.numpy.bool_(False),
                                           jax.random.PRNGKey(3)))  # [signaller, label (FM, malicious), intention]
    mal = c[:, 1].sum(1)
    assert (mal[1:] > 0.15 * mal.sum()).all(), mal
    meant = c[:, :, 1].sum(0)  # [FM, malicious] breaks the signaller meant (the CHEATER's intention)
    fm, total_mal = c[:, 0].sum(), c[:, 1].sum()
    assert fm > 50 and meant[0] < 0.5 * fm and meant[1] > 0.9 * total_mal, (fm, total_mal, meant)


def test_the_oracle_sends_its_proposals_to_the_cheater_elsewhere():
    """cheater_value's ORACLE is BLIND with proposals to the CHEATER's seat redirected: with the CHEATER in a fixed
    seat (nexus-research-v1: seat 1) it never proposes there, BLIND does, and the honest seats get more."""
    run = make_pricer(LearnerEnv.make("nexus-research-v1", {"max_steps": 30}), 16)
    key = jax.random.PRNGKey(1)
    blind, oracle = (describe(jax.device_get(run(jax.numpy.bool_(o), key)))["proposals_to_seat"] for o in (False, True))
    assert blind[1] > 0 and oracle[1] == 0, (blind, oracle)
    assert sum(oracle[2:]) > sum(blind[2:]), (blind, oracle)


def test_scripted_evaluator_hedge_vaults_and_the_plain_policy_does_not():
    env = LearnerEnv.make("nexus-research-v0", {"max_steps": 12}, "factored")
    run = make_scripted(env, 3)
    key = jax.random.PRNGKey(0)
    hedge = describe(scripted_policy(run, env.env.default_params, "HEDGE", key))
    plain = describe(scripted_policy(run, env.env.default_params, "RECIPROCATOR", key))
    assert hedge["vault_use"] > 0 and plain["vault_use"] == 0
    assert np.isfinite(hedge["return"]) and np.isfinite(plain["return"])
    for d in (hedge, plain):  # the per-partner breakdown adds up to the seat's totals
        assert np.mean(d["trust_by_seat"][1:]) == pytest.approx(d["trust_in_learner"], abs=1e-6)
        assert sum(d["trades_by_seat"]) == pytest.approx(d["trades"], abs=1e-6)
        assert d["trust_by_seat"][0] == 0.5 and d["trades_by_seat"][0] == 0  # seat 0 is not its own partner
        assert d["proposals_to_seat"][0] == 0 and d["refused_by_seat"][0] == 0
        assert all(0 <= r <= q for r, q in zip(d["refused_by_seat"], d["proposals_to_seat"]))
    assert sum(plain["proposals_to_seat"]) > 0


def test_paired_is_the_mean_difference_with_a_ci():
    m, h = paired([3.0, 5.0, 7.0], [1.0, 2.0, 3.0])
    assert m == 3.0 and h > 0


def test_research_trace_splits_partners_by_the_behaviour_they_play():
    base = LearnerEnv.make("nexus-research-hidden-v0", {"max_steps": 12}, "factored")
    params = base.env.default_params
    env, hp, act = scripted_act(base, *scripted_args(params, "RECIPROCATOR"))
    sums, counts, acc = make_tracer(env, act, hp, 8, 12, params.behaviours)(jax.random.PRNGKey(0))
    np.testing.assert_array_equal(np.asarray(counts), np.tile([8.0, 16.0], (12, 1)))  # one CHEATER, two honest
    r = summarise(sums, counts, acc, 8, 12)
    assert abs(sum(r["action_type_share"].values()) - 1.0) < 1e-6 and r["invalid_rate"] == 0.0
    for kind in ("cheater", "honest"):
        trust = np.asarray(r["per_step"][kind]["trust_out"])
        assert trust.shape == (12,) and ((trust >= 0) & (trust <= 1)).all()
        assert trust[0] == 0.5  # T starts at initial_trust


def test_population_trace_counts_every_seat():
    base = LearnerEnv.make("nexus-research-hidden-selfplay-v0", {"max_steps": 10}, "factored")
    params = base.env.default_params
    env = base.with_params(params)

    def act(k, obs, state, masks):  # WAIT everywhere
        return jax.numpy.zeros(obs.shape[:2] + (5,), jax.numpy.int32), None

    rows, acc = make_population_tracer(env, act, params, 4, 10)(jax.random.PRNGKey(0))
    rows, acc = np.asarray(rows), np.asarray(acc)
    assert rows.shape == (10, 3) and (rows[:, :2] == 0).all()  # nobody proposes or trades
    assert acc[0] == 4 * 10 * 4 and acc[1:].sum() == 0  # every seat-step a WAIT
    np.testing.assert_allclose(rows[0, 2], 4 * 0.5)  # trust starts at 0.5 (summed over 4 episodes)


@pytest.fixture(scope="module")
def research_runs():
    env = LearnerEnv.make("nexus-research-v0")
    run = make_scripted(env, 1024)  # at 256 episodes the CI is ~0.06 wide
    key = jax.random.PRNGKey(5)
    return {name: describe(scripted_policy(run, env.env.default_params, name, key)) for name in ("BLIND", "RECIPROCATOR")}


def test_history_blind_policy_has_a_negative_raw_gap_and_a_controlled_gap_of_zero(research_runs):
    blind = research_runs["BLIND"]
    assert blind["attribution_gap_ci95"][1] < -0.05  # the capacity confound of the raw metric
    lo, hi = blind["attribution_gap_controlled_ci95"]
    assert lo < 0 < hi and hi - lo < 0.04
    assert blind["controlled_coverage"][0] > 0.8


def test_the_reciprocator_which_discounts_force_majeure_has_a_positive_controlled_gap(research_runs):
    # npc_fm_discount 0.1: in its memory a force-majeure break weighs a tenth of a malicious one
    rec = research_runs["RECIPROCATOR"]
    assert rec["attribution_gap_controlled_ci95"][0] > 0
    assert rec["controlled_mal_minus_base"] < rec["controlled_fm_minus_base"]

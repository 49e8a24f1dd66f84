"""The capacity-controlled attribution gap (train/attribution.py): the estimator on data with a known answer,
and on the env, where a history-blind policy must score ~0 although its raw gap is far below 0."""
from types import SimpleNamespace

import jax.numpy as jnp
import numpy as np

from nexus_jax.envs.nexus import core
from train import attribution
from train.attribution import BASE, FM, MAL, by_policy, controlled_gap, history_blind
from train.learner_env import LearnerEnv


def counts(rates: dict, episodes: int = 400, steps: int = 20, seed: int = 0) -> np.ndarray:
    """(E, 3, 2 strata, 2) binomial counts: rates[(kind, stratum)] = proposal rate; absent = no pair-steps."""
    rng = np.random.default_rng(seed)
    c = np.zeros((episodes, 3, 2, 2))
    for (kind, s), p in rates.items():
        c[:, kind, s, 0] = steps
        c[:, kind, s, 1] = rng.binomial(steps, p, episodes)
    return c


def test_capacity_alone_gives_no_gap():
    # A shocked partner (stratum 0) is proposed to less whatever broke; force-majeure windows all fall there.
    c = counts({(BASE, 0): 0.05, (BASE, 1): 0.2, (FM, 0): 0.05, (MAL, 1): 0.2})
    raw = c[:, FM, :, 1].sum() / c[:, FM, :, 0].sum() - c[:, MAL, :, 1].sum() / c[:, MAL, :, 0].sum()
    out = controlled_gap(c, boot=200)
    assert raw < -0.1
    assert out["ci_gap"][0] < 0 < out["ci_gap"][1] and abs(out["gap"]) < 0.02
    assert out["coverage"] == [1.0, 1.0]


def test_forgiving_force_majeure_and_punishing_malice_gives_a_positive_gap():
    c = counts({(BASE, 0): 0.2, (BASE, 1): 0.2, (FM, 0): 0.2, (MAL, 1): 0.05})
    out = controlled_gap(c, boot=200)
    assert out["ci_gap"][0] > 0.1
    np.testing.assert_allclose(out["fm_minus_base"], 0.0, atol=0.02)
    np.testing.assert_allclose(out["mal_minus_base"], -0.15, atol=0.02)


def test_strata_without_a_baseline_are_left_out():
    c = counts({(BASE, 0): 0.2, (FM, 0): 0.3, (FM, 1): 0.9, (MAL, 0): 0.2})
    out = controlled_gap(c, boot=50)
    assert out["coverage"][0] == 0.5 and out["coverage"][1] == 1.0
    np.testing.assert_allclose(out["gap"], 0.1, atol=0.03)


def test_history_blind_zeroes_only_the_history_terms_of_one_row():
    p = LearnerEnv.make("nexus-research-hidden-v1").env.default_params
    assert float(np.asarray(p.npc_min_trust)[0]) == np.float32(0.4)  # on v1 the LEARNER row deals by trust: blind drops it too
    b = history_blind(p)
    for f in attribution.HISTORY_TERMS:
        assert float(np.asarray(getattr(b, f))[0]) == 0.0
        np.testing.assert_array_equal(np.asarray(getattr(b, f))[1:], np.asarray(getattr(p, f))[1:])
    np.testing.assert_array_equal(np.asarray(b.npc_need_weight), np.asarray(p.npc_need_weight))


def test_pooling_policies_keeps_each_with_its_own_baseline():
    # Policy A proposes 0.5 at baseline and after malice, policy B 0.1 everywhere; A's windows are all
    # force majeure, B's all malicious. Each has gap 0 against its own baseline; shared strata would not.
    a = counts({(BASE, 0): 0.5, (FM, 0): 0.5}, seed=1)
    b = counts({(BASE, 0): 0.1, (MAL, 0): 0.1}, seed=2)
    mixed = controlled_gap(np.concatenate([a, b]), boot=50)
    pooled = controlled_gap(by_policy([a, b]), boot=200)
    assert mixed["gap"] > 0.15
    assert pooled["ci_gap"][0] < 0 < pooled["ci_gap"][1] and abs(pooled["gap"]) < 0.02


def test_a_payment_ahead_is_cooperation_counted_in_its_own_stratum():
    """signal_prepay: seat 0 paying partner 1's signal ahead counts as cooperating with it, and a pair-step with an
    unpaid signal open to seat 0 falls in the second half of the strata (the chance to pay ahead) only under the rule."""
    p = LearnerEnv.make("nexus-research-reliance-v1").env.default_params
    n = p.num_agents
    state = core.initial_state(p, jnp.zeros((n, 2)))
    sig = state.signals
    state = state.replace(signals=sig.replace(active=sig.active.at[1, 0].set(True)))
    acc = SimpleNamespace(window_left=jnp.zeros((n, n), jnp.int32), window_fm=jnp.zeros((n, n), bool))
    relied = jnp.zeros((n, n), bool).at[1, 0].set(True)
    info = {"stats": {"proposals": jnp.zeros((n, n), bool), "relied": relied}}
    half = attribution.num_strata(n) // 2
    on = np.asarray(attribution.step_counts(acc, state, info, jnp.bool_(True)))
    off = np.asarray(attribution.step_counts(acc, state, info, jnp.bool_(False)))
    assert on.shape == off.shape == (3, 2 * half, 2)
    assert on[BASE, half:, 0].sum() == 1 and on[BASE, half:, 1].sum() == 1  # partner 1: could pay ahead, and did
    assert on[BASE, :half, 0].sum() == n - 2 and on[BASE, :half, 1].sum() == 0  # partners 2, 3
    assert off[BASE, half:].sum() == 0 and off[BASE, :half, 0].sum() == n - 1

"""Advantage alignment (train/alignment.py) against a loop that writes the formula out, its refusal, and the trainer's use of it."""
import jax
import numpy as np
import pytest

from nexus_jax.base.spec import EnvSpec
from train.alignment import align_advantages, answered_others, check_alignment
from nexus_jax.envs.nexus.constants import ActionType as T
from train.config import ConfigError, load_config
from train.learner_env import LearnerEnv
from train.ppo import make_train


def others_by_loop(unit_te, partners_te):
    """O_i(t) for one step of one env: the mean of the other seats' Â (scope "all", partners None), or of
    Â_j - mean_k Â_k over the seats j that i addressed or that addressed i (scope "partner")."""
    n = unit_te.shape[0]
    if partners_te is None:
        return (unit_te.sum() - unit_te) / (n - 1)
    out = np.zeros(n)
    for i in range(n):
        linked = [j for j in range(n) if j != i and (partners_te[i] == j or partners_te[j] == i)]
        out[i] = np.mean([unit_te[j] - unit_te.mean() for j in linked]) if linked else 0.0
    return out


def aligned_by_loop(adv, done, gamma, beta, partners=None):
    """A*_i(t) = A_i(t) + beta gamma P_i(t) O_i(t), written step by step in numpy (the module docstring)."""
    t_len, n_env, n = adv.shape
    scale = adv.std() + 1e-8
    unit = adv / scale
    out = adv.copy()
    for e in range(n_env):
        start = 0
        for t in range(t_len):
            past = sum(gamma ** (t - k) * unit[k, e] for k in range(start, t)) if t > start else np.zeros(n)
            others = others_by_loop(unit[t, e], None if partners is None else partners[t, e])
            out[t, e] += beta * gamma * past * others * scale
            if done[t, e, 0]:
                start = t + 1
    return out


def test_matches_the_formula_with_episode_resets():
    rng = np.random.default_rng(0)
    adv = rng.normal(size=(9, 2, 3)).astype(np.float32)
    done = np.zeros((9, 2, 3), bool)
    done[3, 0] = True  # env 0: an episode ends at step 3, so step 4 has no past
    done[6, 1] = True
    got = np.asarray(align_advantages(adv, done, 0.9, 0.5))
    np.testing.assert_allclose(got, aligned_by_loop(adv, done, 0.9, 0.5), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[0], adv[0])  # the first step of a chunk has no past
    np.testing.assert_array_equal(got[4, 0], adv[4, 0])  # nor the first step after an episode ends


def test_partner_scope_matches_the_formula():
    rng = np.random.default_rng(1)
    adv = rng.normal(size=(7, 2, 4)).astype(np.float32)
    done = np.zeros((7, 2, 4), bool)
    done[2, 1] = True
    partners = rng.integers(-1, 4, size=(7, 2, 4)).astype(np.int32)  # -1: addressed no learner seat
    got = np.asarray(align_advantages(adv, done, 0.9, 0.7, partners))
    np.testing.assert_allclose(got, aligned_by_loop(adv, done, 0.9, 0.7, partners), rtol=1e-5, atol=1e-5)


def answered_by_loop(unit, offers, answers, done):
    """O_i(t) of scope "answered" written out: an answer takes its offerer's relative advantage now; an offer takes
    the target's at the first later step of the episode where the target answers the offerer (each answer used by
    the latest offer before it)."""
    t_len, n_env, n = unit.shape
    rel = unit - unit.mean(-1, keepdims=True)
    out = np.zeros_like(unit)
    for e in range(n_env):
        for t in range(t_len):
            for i in range(n):
                if answers[t, e, i] >= 0:
                    out[t, e, i] = rel[t, e, answers[t, e, i]]
                j = offers[t, e, i]
                if j < 0:
                    continue
                for u in range(t + 1, t_len):
                    if done[u - 1, e, 0]:
                        break  # the episode ended: no later answer belongs to this offer
                    if offers[u - 1, e, i] == j and u - 1 > t:
                        break  # a later offer to j takes the next answer
                    if answers[u, e, j] == i:
                        out[t, e, i] = rel[u, e, j]
                        break
    return out


def test_answered_scope_matches_the_formula():
    rng = np.random.default_rng(2)
    t_len, n_env, n = 12, 3, 4
    unit = rng.normal(size=(t_len, n_env, n)).astype(np.float32)
    kind = rng.integers(0, 3, size=(t_len, n_env, n))  # 0 neither, 1 an offer, 2 an answer
    target = (np.arange(n) + rng.integers(1, n, size=(t_len, n_env, n))) % n  # another seat
    offers = np.where(kind == 1, target, -1).astype(np.int32)
    answers = np.where(kind == 2, target, -1).astype(np.int32)
    done = np.zeros((t_len, n_env, n), bool)
    done[5, 1] = True
    got = np.asarray(answered_others(unit, offers, answers, done))
    np.testing.assert_allclose(got, answered_by_loop(unit, offers, answers, done), rtol=1e-5, atol=1e-6)
    assert (got[offers >= 0] != 0).any() and (got[answers >= 0] != 0).any()
    np.testing.assert_array_equal(got[(offers < 0) & (answers < 0)], 0.0)


def test_offers_and_answers_read_propose_and_its_answers():
    env = LearnerEnv.make("nexus-selfplay-v2")
    rows = np.array([[T.PROPOSE, 2, 1, 1, 0], [T.SIGNAL, 0, 1, 1, 0], [T.REJECT, 3, 0, 0, 0], [T.ACCEPT, 1, 0, 0, 0]],
                    np.int32)
    offers, answers = env.offers_and_answers(rows)
    np.testing.assert_array_equal(offers, [2, -1, -1, -1])
    np.testing.assert_array_equal(answers, [-1, -1, 3, 1])
    with pytest.raises(ValueError, match="offers names"):
        EnvSpec(partner_types={"PROPOSE": 1}, offers={"PROPOSE": ("ACCEPT",)})


def test_partners_read_the_addressed_seat():
    """PROPOSE/ACCEPT/REJECT/SIGNAL name a seat; WAIT/WORK/VAULT/UNVAULT none; the flat head decodes first."""
    env = LearnerEnv.make("nexus-selfplay-v2")
    rows = np.array([[T.PROPOSE, 2, 1, 1, 0], [T.ACCEPT, 0, 0, 0, 0], [T.VAULT, 3, 1, 0, 1], [T.SIGNAL, 1, 0, 0, 0]],
                    np.int32)
    np.testing.assert_array_equal(env.partners(rows), [2, 0, -1, 1])
    flat = LearnerEnv.make("nexus-selfplay-v2", action_head="flat")
    np.testing.assert_array_equal(flat.partners(flat.env.encode(rows)), [2, 0, -1, 1])
    npcs = LearnerEnv.make("nexus-v2")  # one learner seat (agent_0): an NPC partner is no learner's
    np.testing.assert_array_equal(npcs.partners(rows[:1, None]), [[-1]])
    np.testing.assert_array_equal(npcs.partners(np.array([[[T.REJECT, 0, 0, 0, 0]]], np.int32)), [[0]])


def test_align_types_pick_the_actions_that_connect_seats():
    """`types` (config `align_types`): only the named partner types address a seat; an unknown name is refused."""
    env = LearnerEnv.make("nexus-selfplay-v2")
    rows = np.array([[T.PROPOSE, 2, 1, 1, 0], [T.SIGNAL, 0, 1, 1, 0], [T.REJECT, 3, 0, 0, 0], [T.ACCEPT, 1, 0, 0, 0]],
                    np.int32)
    np.testing.assert_array_equal(env.partners(rows), [2, 0, 3, 1])
    np.testing.assert_array_equal(env.partners(rows, ("PROPOSE", "ACCEPT", "REJECT")), [2, -1, 3, 1])
    np.testing.assert_array_equal(env.partners(rows, ("ACCEPT", "REJECT")), [-1, -1, 3, 1])
    with pytest.raises(ValueError, match=r"align_types \['WORK'\] are not partner types"):
        env.partners(rows, ("WORK",))


def test_config_names_a_bad_align_types():
    base = TINY + ["align_beta=0.3", "env_id=nexus-selfplay-v2"]
    cfg = load_config(overrides=base + ["align_scope=partner", "align_types=[ACCEPT,REJECT]"])
    assert tuple(cfg.align_types) == ("ACCEPT", "REJECT") and cfg.to_dict()["align_types"] == ["ACCEPT", "REJECT"]
    with pytest.raises(ConfigError, match="'align_types'.*needs align_scope=partner"):
        load_config(overrides=base + ["align_types=[ACCEPT]"])
    with pytest.raises(ConfigError, match="'align_types'.*partner types"):
        load_config(overrides=base + ["align_scope=partner", "align_types=[WORK]"])


def test_reciprocity_sign():
    """A seat whose past went well is pushed toward what helps the others now; badly, away from it."""
    adv = np.zeros((2, 1, 2), np.float32)
    adv[0] = [[1.0, 0.0]]   # seat 0 did well at step 0
    adv[1] = [[0.0, 1.0]]   # at step 1, seat 0's action coincided with seat 1 doing well
    done = np.zeros_like(adv, bool)
    assert float(align_advantages(adv, done, 0.99, 1.0)[1, 0, 0]) > 0
    adv[0] = [[-1.0, 0.0]]
    assert float(align_advantages(adv, done, 0.99, 1.0)[1, 0, 0]) < 0


def test_refuses_one_learner_seat():
    with pytest.raises(ValueError, match="align_beta=0.5 needs an env with at least two learner seats"):
        check_alignment(0.5, 1)
    check_alignment(0.0, 1)
    check_alignment(0.5, 4)


TINY = ["env.ledger_size=8", "env.obs_ledger_events=2", "env.max_steps=10", "num_envs=4", "num_steps=10",
        "total_timesteps=40", "num_minibatches=1", "hidden_size=8", "num_layers=1", "progress=false"]


def test_the_trainer_refuses_it_with_one_learner_seat_and_takes_it_in_self_play():
    """Traced only (no compilation): nexus-v2 has one learner seat, nexus-selfplay-v2 four."""
    rng = jax.random.PRNGKey(0)
    with pytest.raises(ValueError, match="needs an env with at least two learner seats"):
        jax.eval_shape(make_train(load_config(overrides=TINY + ["align_beta=0.3"])), rng)
    for extra in (["align_scope=all"], ["align_scope=partner"], ["align_scope=partner", "align_types=[ACCEPT,REJECT]"],
                  ["align_scope=answered"]):
        cfg = load_config(overrides=TINY + ["align_beta=0.3", "env_id=nexus-selfplay-v2", *extra])
        out = jax.eval_shape(make_train(cfg), rng)
        assert out["metrics"]["episode_return"].shape == (1,)

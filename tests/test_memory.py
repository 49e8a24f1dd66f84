"""Recurrent policies (train/memory.py): the memory resets exactly at episode ends, replays equal the rollout, masks
hold after the core, and a recurrent entity policy plays at another N.

Tiny shapes: nexus-v0 with 3-step episodes, 4 envs, 8 hidden units; one compiled rollout of 7 steps (three
episodes per env, two auto-resets) serves the reset and replay tests.
"""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from nexus_jax import rollout
from nexus_jax.envs.nexus import NexusParams
from train.entity_env import EntityLearnerEnv
from train.config import GRPOConfig
from train.entity_net import EntityActorCritic
from train.grpo import advantages, grpo_loss, rollout_groups
from train.learner_env import LearnerEnv
from train.memory import GRUCore, first_steps, gru_scan, policy_act
from train.networks import ActorCritic, orthogonal
from train.suite.runner import make_runner
from train.suite.scenarios import HEURISTIC, POLICY

E, T, EPISODE = 4, 7, 3  # envs, steps, episode length: steps 0, 3 and 6 start an episode


def _equal(a, b) -> bool:
    return all(jax.tree.leaves(jax.tree.map(lambda x, y: bool(np.array_equal(np.asarray(x), np.asarray(y))), a, b)))


@pytest.fixture(scope="module")
def episodes():
    """A recurrent policy's rollout over auto-resets (`long`), the same steps from the state after the first
    auto-reset with a fresh memory (`fresh`), and with the memory the policy had before that reset (`leaky`:
    what a rollout that forgot the reset would play). One compiled program."""
    env = LearnerEnv.make("nexus-v0", {"max_steps": EPISODE}, "factored")
    policy = ActorCritic(1, env.obs_dim, "factored", env.nvec, hidden=8, layers=1, memory=8)
    obs, state = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), E))
    params = policy.init(jax.random.PRNGKey(1), obs, jax.vmap(env.masks)(state))
    params = jax.tree.map(lambda x: 5.0 * x, params)  # strong weights: the memory moves the outputs visibly
    keys = jax.random.split(jax.random.PRNGKey(2), T + EPISODE)

    def act(k, obs, state, masks, memory):
        action, log_prob, _, value, memory = policy.step(params, obs, masks, k, memory)
        return action, (log_prob, value, memory["actor"]), memory

    def record(acc, s: rollout.Step):
        return acc, {"obs": s.obs, "state": s.state, "masks": s.masks, "action": s.action, "log_prob": s.extra[0],
                     "value": s.extra[1], "after": s.extra[2], "memory": s.memory["actor"], "done": s.done}

    @jax.jit
    def run(obs, state, step_keys, memory0):
        recurrent = rollout.Recurrent(act, lambda n: {"actor": memory0})
        return rollout.scan(env, recurrent, record, None, obs, state, step_keys, rollout.batch_split(E))[1]

    zeros = policy.initial_memory(E)["actor"]
    long = run(obs, state, keys[:T], zeros)
    at_reset = (long["obs"][EPISODE], jax.tree.map(lambda x: x[EPISODE], long["state"]), keys[EPISODE:])
    fresh = run(*at_reset, zeros)
    leaky = run(*at_reset, long["after"][EPISODE - 1])  # the memory after the episode's last step, not reset
    return policy, params, long, fresh, leaky


def test_gru_core_reset_starts_the_sequence_afresh():
    core = GRUCore(6, orthogonal())
    x = jax.random.normal(jax.random.PRNGKey(0), (5, 3, 4))
    carry = jax.random.normal(jax.random.PRNGKey(1), (3, 6))
    resets = jnp.zeros((5, 3), bool).at[2, 1].set(True)  # env 1 starts an episode at step 2
    params = core.init(jax.random.PRNGKey(2), carry, x, resets)
    _, y = core.apply(params, carry, x, resets)
    _, fresh = core.apply(params, jnp.zeros((1, 6)), x[2:, 1:2], jnp.zeros((3, 1), bool))
    np.testing.assert_allclose(np.asarray(y[2:, 1]), np.asarray(fresh[:, 0]), rtol=1e-6, atol=1e-6)  # batch of 1
    _, no_reset = core.apply(params, carry, x, jnp.zeros((5, 3), bool))
    np.testing.assert_array_equal(np.asarray(y[:, 0]), np.asarray(no_reset[:, 0]))  # the other envs: untouched
    assert not np.allclose(np.asarray(y[2:, 1]), np.asarray(no_reset[2:, 1]))


def test_the_core_is_flax_gru_cell_and_its_written_out_gradient_is_autodiffs():
    """GRUCore with flax GRUCell's weights (stacked per gate) computes what the cell scanned by hand does, and
    `gru_scan`'s custom gradient equals autodiff through a plain scan of the same equations."""
    H, F, T_, B = 5, 3, 6, 4
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    x = jax.random.normal(keys[0], (T_, B, F))
    carry = jax.random.normal(keys[1], (B, H))
    resets = jax.random.uniform(keys[2], (T_, B)) < 0.3
    cell = nn.GRUCell(H)
    p = cell.init(keys[3], carry, x[0])["params"]
    stack = lambda part, names: jnp.concatenate([p[n][part] for n in names], -1)  # noqa: E731
    ours = {"params": {"input": {"kernel": stack("kernel", ("ir", "iz", "in")), "bias": stack("bias", ("ir", "iz", "in"))},
                       "recurrent_kernel": stack("kernel", ("hr", "hz", "hn")),
                       "recurrent_bias": jnp.concatenate([jnp.zeros(2 * H), p["hn"]["bias"]])}}

    def by_hand(c, xs):
        def body(c, inp):
            xt, rt = inp
            c, y = cell.apply({"params": p}, jnp.where(rt[:, None], 0.0, c), xt)
            return c, y
        return jax.lax.scan(body, c, xs)

    got = GRUCore(H, orthogonal()).apply(ours, carry, x, resets)
    want = by_hand(carry, (x, resets))
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)

    def plain(c, gx, resets, w, b):
        def body(c, inp):
            g, rt = inp
            c = jnp.where(rt[:, None], 0.0, c)
            gh = c @ w + b
            r, z = jax.nn.sigmoid(g[:, :H] + gh[:, :H]), jax.nn.sigmoid(g[:, H:2 * H] + gh[:, H:2 * H])
            c = (1 - z) * jnp.tanh(g[:, 2 * H:] + r * gh[:, 2 * H:]) + z * c
            return c, c
        return jax.lax.scan(body, c, (gx, resets))

    gx = jax.random.normal(keys[0], (T_, B, 3 * H))
    w, b = ours["params"]["recurrent_kernel"], ours["params"]["recurrent_bias"] + 0.1
    target = jax.random.normal(keys[1], (T_, B, H))

    def loss(fn):
        def f(c, gx, w, b):
            last, ys = fn(c, gx, resets, w, b)
            return ((ys - target) ** 2).sum() + (last ** 3).sum()
        return jax.grad(f, argnums=(0, 1, 2, 3))

    for a, b in zip(loss(gru_scan)(carry, gx, w, b), loss(plain)(carry, gx, w, b)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)


def test_memory_is_zero_exactly_where_an_episode_starts(episodes):
    _, _, long, _, _ = episodes
    done = np.asarray(long["done"])
    assert done[[EPISODE - 1, 2 * EPISODE - 1]].all() and done.sum() == 2 * E  # two auto-resets per env
    norm = np.abs(np.asarray(long["memory"])).sum((1, 2, 3))  # (T,)
    starts = [0, EPISODE, 2 * EPISODE]
    assert (norm[starts] == 0).all()
    assert (np.delete(norm, starts) > 0).all()


def test_an_episode_after_an_auto_reset_plays_as_from_a_fresh_reset(episodes):
    """Same state, same keys: the episodes after the first auto-reset of the long rollout and the same steps started
    from a fresh reset give the policy's outputs bit for bit. Had the rollout kept the memory over the reset
    (`leaky`), they would differ: the test fails if state leaks across an auto-reset."""
    _, _, long, fresh, leaky = episodes
    after = slice(EPISODE, T)
    for k in ("action", "log_prob", "value", "memory", "done"):
        np.testing.assert_array_equal(np.asarray(long[k][after]), np.asarray(fresh[k][:T - EPISODE]), err_msg=k)
    assert np.abs(np.asarray(leaky["memory"][0])).min(-1).max() > 0
    assert np.abs(np.asarray(leaky["log_prob"][0] - fresh["log_prob"][0])).max() > 1e-3


def test_replaying_the_sequence_from_its_first_memory_gives_the_rollouts_outputs(episodes):
    """What PPO's loss does: the whole sequence scored at once from the memory at step 0, reset where the previous
    step ended an episode; without the resets the outputs after the first episode differ."""
    policy, params, long, _, _ = episodes
    memory = policy.initial_memory(E, critic=True)
    replay = jax.jit(lambda resets: policy.evaluate_sequence(params, long["obs"], long["masks"], long["action"],
                                                             memory, resets, value=True))
    log_prob, _, value = replay(first_steps(long["done"]))
    np.testing.assert_allclose(np.asarray(log_prob), np.asarray(long["log_prob"]), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(value), np.asarray(long["value"]), rtol=1e-5, atol=1e-5)
    log_prob_leak, _, _ = replay(jnp.zeros_like(long["done"]))
    gap = np.abs(np.asarray(log_prob_leak - long["log_prob"]))
    assert gap[:EPISODE].max() < 1e-5 < gap[EPISODE:].max()


def _random_factored_masks(key, batch, nvec):
    t, n, levels, _, r = nvec
    shapes = {"type": (t,), "target": (t, n), "resource": (t, r), "amount_1": (t, r, levels),
              "amount_2": (t, r, levels)}
    out = {}
    for k, (name, shape) in zip(jax.random.split(key, 5), shapes.items()):
        first = jax.nn.one_hot(jax.random.randint(k, batch + shape[:-1], 0, shape[-1]), shape[-1]) > 0
        out[name] = (jax.random.uniform(k, batch + shape) < 0.4) | first
    return out


@pytest.mark.parametrize("head", ["factored", "flat"])
def test_masks_hold_after_the_core(head):
    """Large weights and a random memory make masked choices tempting: the heads, after the core, never pick one."""
    nvec, n_flat = (8, 3, 4, 4, 2), 11
    policy = ActorCritic(2, 6, head, nvec if head == "factored" else None, n_flat, hidden=8, layers=1, memory=8)
    obs = jax.random.normal(jax.random.PRNGKey(0), (256, 2, 6))
    if head == "factored":
        masks = _random_factored_masks(jax.random.PRNGKey(1), (256, 2), nvec)
    else:
        masks = (jax.random.uniform(jax.random.PRNGKey(1), (256, 2, n_flat)) < 0.2).at[..., 0].set(True)
    params = jax.tree.map(lambda x: 50.0 * x, policy.init(jax.random.PRNGKey(2), obs, masks))
    memory = {"actor": jax.random.normal(jax.random.PRNGKey(3), (256, 2, 8))}
    step = jax.jit(policy.act_step)
    for seed in range(3):
        a, log_prob, _, memory = step(params, obs, masks, jax.random.PRNGKey(10 + seed), memory)
        a, m = np.asarray(a), jax.tree.map(np.asarray, masks)
        if head == "flat":
            assert np.take_along_axis(m, a[..., None], -1).all()
        else:
            t, j, a1, a2, r = (a[..., k] for k in range(5))
            idx = np.indices(t.shape)
            for ok in (m["type"][(*idx, t)], m["target"][(*idx, t, j)], m["resource"][(*idx, t, r)],
                       m["amount_1"][(*idx, t, r, a1)], m["amount_2"][(*idx, t, r, a2)]):
                assert ok.all()
        assert np.isfinite(np.asarray(log_prob)).all()


def test_feedforward_methods_refuse_a_policy_with_memory():
    policy = ActorCritic(1, 6, "flat", num_actions=3, hidden=8, layers=1, memory=4)
    with pytest.raises(TypeError, match="has a memory"):
        policy.act(None, jnp.zeros((2, 1, 6)), jnp.ones((2, 1, 3), bool), jax.random.PRNGKey(0))
    assert policy.initial_memory(5)["actor"].shape == (5, 1, 4) and "critic" not in policy.initial_memory(5, True)
    mappo = ActorCritic(1, 6, "flat", num_actions=3, hidden=8, layers=1, critic="mappo", memory=4)
    assert sorted(mappo.initial_memory(5, critic=True)) == ["actor", "critic"]
    assert not isinstance(policy_act(ActorCritic(1, 6, "flat", num_actions=3), None), rollout.Recurrent)


@pytest.mark.slow
def test_a_recurrent_entity_policy_plays_at_another_number_of_seats():
    """One set of entity-network params with a memory (initialised at N=4) plays N=6 through the one evaluator
    and through the evaluation suite's runner: its memory is one vector per seat whatever N."""
    env4 = EntityLearnerEnv.make("nexus-v0", {"max_steps": 4})
    policy = EntityActorCritic(1, env4.nvec[2], hidden=8, memory=8)
    obs, state = jax.vmap(env4.reset)(jax.random.split(jax.random.PRNGKey(0), 2))
    params = policy.init(jax.random.PRNGKey(1), obs, jax.vmap(env4.masks)(state))
    env6 = EntityLearnerEnv.make("nexus-v0", {"max_steps": 4, "num_agents": 6})
    ep = jax.jit(lambda p, k: rollout.evaluate(env6, policy_act(policy, p), k, 4, 4))(params, jax.random.PRNGKey(2))
    assert np.isfinite(np.asarray(ep.returns)).all() and (np.asarray(ep.length) == 4).all()
    run = make_runner(6, 4, 3, policy, chunk=1, policy_seats=(0,))
    p6 = NexusParams.create(num_agents=6, max_steps=4)
    kinds = jnp.asarray([[POLICY] + [HEURISTIC] * 5], jnp.int32)
    args = jnp.asarray(p6.archetypes, jnp.int32).at[0].set(0)[None]  # seat 0: bank entry 0; the rest their NPCs
    bank = jax.tree.map(lambda x: x[None], params)
    out = run(p6, kinds, args, bank, jax.random.PRNGKey(3))
    assert np.asarray(out.returns).shape == (1, 3, 6) and np.isfinite(np.asarray(out.returns)).all()


@pytest.mark.slow
def test_grpo_replays_each_group_members_sequence_as_it_was_played():
    """Episodes of 4 steps in 6-step group rollouts (each member plays on after an auto-reset, uncounted): the loss's
    replay from zero memories gives the rollout's log-probabilities at every step, so at the rollout's params the
    ratio is 1 and the KL to the reference (the same params) 0."""
    env = LearnerEnv.make("nexus-v0", {"max_steps": 4}, "factored")
    policy = ActorCritic(1, env.obs_dim, "factored", env.nvec, hidden=8, layers=1, memory=8)
    obs, state = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), 2))
    params = policy.init(jax.random.PRNGKey(1), obs, jax.vmap(env.masks)(state))
    actor = {"actor": jax.tree.map(lambda x: 5.0 * x, params["actor"])}
    cfg = GRPOConfig(group_size=2, num_groups=2, episode_steps=6, num_minibatches=1)
    batch = jax.jit(lambda k: rollout_groups(actor, actor, k, env, policy, cfg))(jax.random.PRNGKey(2))
    assert np.asarray(batch.resets).any() and not np.asarray(batch.alive).all()  # a reset inside the sequences
    _, aux = jax.jit(lambda b: grpo_loss(actor, policy, b, advantages(b, cfg), cfg))(batch)
    assert float(aux["approx_kl"]) < 1e-6 and float(aux["kl_ref"]) < 1e-6
    seq = lambda x: jnp.moveaxis(x, 1, 0).reshape((x.shape[1], -1) + x.shape[3:])  # noqa: E731
    log_prob, _ = policy.evaluate_sequence(actor, seq(batch.obs), jax.tree.map(seq, batch.masks), seq(batch.action),
                                           policy.initial_memory(4), seq(batch.resets))
    np.testing.assert_allclose(np.asarray(log_prob), np.asarray(seq(batch.log_prob)), rtol=1e-5, atol=1e-5)

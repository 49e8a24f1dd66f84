"""The ecosystem study's ports run upstream's own configs with exactly the changes the guide's recipes make
(docs/recipes/*.diff, read through tests/recipes.py: the recipe's make line run on the config it gives): JaxMARL's
ippo_ff_mpe.yaml (through experiments/ecosystem/ippo_ff.py), mappo_homogenous_rnn_mpe.yaml and ippo_rnn_smax.yaml
(through experiments/ecosystem/ippo_rnn_masked.py) and PureJaxRL ppo.py's config (through
experiments/ecosystem/purejaxrl_ppo.py); and the SMAX-only kwargs left in are refused by name."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nexus_jax
from tests import recipes  # the recipe files the guide shows

baselines = pytest.importorskip("jaxmarl.wrappers.baselines")
spaces = pytest.importorskip("gymnax.environments.spaces")
from experiments.ecosystem import ippo_ff as ippo  # noqa: E402  (our re-implementation of upstream IPPO-FF)
from experiments.ecosystem import ippo_rnn_masked as rnn  # noqa: E402  (and of ippo_rnn_smax.py's data path)
from experiments.ecosystem import purejaxrl_ppo as purejaxrl  # noqa: E402  (and of PureJaxRL's ppo.py)

pytestmark = pytest.mark.slow  # a study's reproduction: the full tier (python -m pytest -m slow; CI runs it)

TOY_SIZES = {"NUM_ENVS": 2, "NUM_STEPS": 4, "TOTAL_TIMESTEPS": 16, "NUM_MINIBATCHES": 2, "UPDATE_EPOCHS": 1,
             "GRU_HIDDEN_DIM": 8, "FC_DIM_SIZE": 8}  # sizes only, so the test compiles in seconds


def recipe_env(name: str, **sizes):
    """(the config the recipe gives, with `sizes`; what its make line binds)."""
    recipe = recipes.read(name)
    config = {**recipes.config(recipe), **sizes}
    return config, recipes.run_make_line(recipe, config, {"nexus_jax": nexus_jax})


def test_ippo_ff_mpe_config_with_the_recipe_trains():
    """ippo_ff_mpe.py's set-up on its yaml with the recipe's changes (ENV_NAME, ENV_KWARGS compact), its
    `MPELogWrapper` (= LogWrapper for one agent), then experiments/ecosystem/ippo_ff.py (its data path and update)
    for two updates. Sizes shrunk, and max_steps 4 so episodes end inside them."""
    config, made = recipe_env("jaxmarl-ippo_ff_mpe", NUM_ENVS=2, NUM_STEPS=4, TOTAL_TIMESTEPS=16, NUM_MINIBATCHES=2,
                              UPDATE_EPOCHS=1)
    assert made["env"].action_format == "compact"
    env = baselines.MPELogWrapper(nexus_jax.make(config["ENV_NAME"], **config["ENV_KWARGS"], max_steps=4))
    out = jax.jit(ippo.make_train(config, env))(jax.random.PRNGKey(config["SEED"]))
    m = jax.tree.map(np.asarray, out["metrics"])
    assert m["returned_episode"].shape == (2,) and m["returned_episode"].max() > 0
    assert np.isfinite(m["total_loss"]).all() and 0 < m["invalid"].mean() < 0.95  # BAD_TYPE flood: ~1.0


def test_ippo_rnn_smax_config_with_the_recipe_trains():
    """ippo_rnn_smax.py's `make_train` set-up on its yaml with the recipe's changes: its make line on
    config["ENV_NAME"] / config["ENV_KWARGS"], NUM_ACTORS, SCALE_CLIP_EPS, SMAXLogWrapper, then its data path
    (experiments/ecosystem/ippo_rnn_masked.py) and the callback's metric reshape (NUM_STEPS, NUM_ENVS, num_agents)."""
    config, made = recipe_env("jaxmarl-ippo_rnn_smax", **TOY_SIZES)
    env = made["env"]
    config["NUM_ACTORS"] = env.num_agents * config["NUM_ENVS"]
    config["CLIP_EPS"] = config["CLIP_EPS"] / env.num_agents if config["SCALE_CLIP_EPS"] else config["CLIP_EPS"]
    env = baselines.SMAXLogWrapper(env)
    train, _ = rnn.make_train(config, env)
    metrics = jax.tree.map(np.asarray, jax.jit(train)(jax.random.PRNGKey(config["SEED"]))["metrics"])
    assert np.isfinite(metrics["total_loss"]).all() and (metrics["invalid"] == 0).all()  # masked: never invalid

    obsv, state = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(1), config["NUM_ENVS"]))
    avail = jax.vmap(env.get_avail_actions)(state.env_state)
    act = {a: jnp.argmax(avail[a], axis=-1) for a in env.agents}  # a valid action per env, squeezed as upstream's
    _, _, _, _, info = jax.vmap(env.step)(jax.random.split(jax.random.PRNGKey(2), config["NUM_ENVS"]), state, act)
    info = jax.tree.map(lambda x: x.reshape((config["NUM_ACTORS"])), info)
    metric = jax.tree.map(lambda x: x.reshape((1, config["NUM_ENVS"], env.num_agents)), info)
    assert metric["returned_won_episode"][:, :, 0][metric["returned_episode"][:, :, 0]].shape == (0,)  # none ended
    assert not np.asarray(info["invalid"]).any()


def test_smax_env_kwargs_left_in_are_refused_naming_the_field():
    """The yaml unchanged but for ENV_NAME: SMAX's kwargs reach NexusParams, which names the first one."""
    with pytest.raises(ValueError, match="NexusParams.see_enemy_actions: unknown field"):
        nexus_jax.make("nexus-v0", **recipes.UPSTREAM_CONFIGS["baselines/IPPO/config/ippo_rnn_smax.yaml"]["ENV_KWARGS"])


def test_mappo_rnn_mpe_config_with_the_recipe_trains():
    """mappo_rnn_mpe.py's set-up on its yaml with the recipe's changes (the env through its make line), then the
    MAPPO-RNN data path (experiments/ecosystem/ippo_rnn_masked.py, `mappo=True`: unmasked GRU actor, world-state
    critic, (1,) actions) through JaxMARL's LogWrapper for two updates."""
    config, made = recipe_env("jaxmarl-mappo_rnn_mpe", **TOY_SIZES)
    assert made["env"].action_format == "compact"
    env = baselines.LogWrapper(nexus_jax.make(config["ENV_NAME"], **config["ENV_KWARGS"], max_steps=4))
    train, _ = rnn.make_train(config, env, mappo=True)
    metrics = jax.tree.map(np.asarray, jax.jit(train)(jax.random.PRNGKey(config["SEED"]))["metrics"])
    assert np.isfinite(metrics["total_loss"]).all() and 0 < metrics["invalid"].mean() < 0.95


def test_purejaxrl_ppo_config_with_the_recipe_trains():
    """ppo.py's `__main__` config with the recipe's changes and its make_gymnax line (compact actions, the
    gymnax 0.0.x step), PureJaxRL's wrappers' data path, two updates (sizes shrunk, max_steps 4)."""
    config, made = recipe_env("purejaxrl-ppo", NUM_ENVS=4, NUM_STEPS=8, TOTAL_TIMESTEPS=64, NUM_MINIBATCHES=2,
                              UPDATE_EPOCHS=1)
    assert made["env"].action_format == "compact" and made["env"].gymnax_v1 is False
    base, params = nexus_jax.make_gymnax(config["ENV_NAME"], gymnax_v1=False, action_format="compact", max_steps=4)
    out = jax.jit(purejaxrl.make_train(config, purejaxrl.PureJaxRLWrappers(base, spaces.Box), params, base.seat))(
        jax.random.PRNGKey(30))
    m = jax.tree.map(np.asarray, out["metrics"])
    assert np.isfinite(m["episode_return"]).all() and 0 < m["invalid"].mean() < 0.95

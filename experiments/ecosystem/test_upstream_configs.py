"""The ecosystem study's ports run upstream's own configs with exactly the changes docs/ecosystem.md names:
JaxMARL's ippo_ff_mpe.yaml (through experiments/ecosystem/ippo_ff.py) and ippo_rnn_smax.yaml (through
experiments/ecosystem/ippo_rnn_masked.py), and the SMAX-only kwargs left in are refused by name."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nexus_jax

baselines = pytest.importorskip("jaxmarl.wrappers.baselines")
from experiments.ecosystem import ippo_ff as ippo  # noqa: E402  (our re-implementation of upstream IPPO-FF)
from experiments.ecosystem import ippo_rnn_masked as rnn  # noqa: E402  (and of ippo_rnn_smax.py's data path)

pytestmark = pytest.mark.slow  # a study's reproduction: the full tier (python -m pytest -m slow; CI runs it)

# baselines/IPPO/config/ippo_ff_mpe.yaml (FLAIROx/JaxMARL@c793d09), every key but the wandb ones
IPPO_FF_MPE_YAML = {
    "LR": 2.5e-4, "NUM_ENVS": 16, "NUM_STEPS": 128, "TOTAL_TIMESTEPS": 1e7, "UPDATE_EPOCHS": 4, "NUM_MINIBATCHES": 4,
    "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.2, "ENT_COEF": 0.01, "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.5,
    "ACTIVATION": "tanh", "ENV_NAME": "MPE_simple_spread_v3", "ENV_KWARGS": {}, "ANNEAL_LR": True, "SEED": 30,
    "NUM_SEEDS": 10,
}

# baselines/IPPO/config/ippo_rnn_smax.yaml (FLAIROx/JaxMARL@c793d09), every key but the wandb ones
IPPO_RNN_SMAX_YAML = {
    "LR": 0.004, "NUM_ENVS": 128, "NUM_STEPS": 128, "GRU_HIDDEN_DIM": 128, "FC_DIM_SIZE": 128, "TOTAL_TIMESTEPS": 1e7,
    "UPDATE_EPOCHS": 4, "NUM_MINIBATCHES": 4, "GAMMA": 0.99, "GAE_LAMBDA": 0.95, "CLIP_EPS": 0.05,
    "SCALE_CLIP_EPS": False, "ENT_COEF": 0.01, "VF_COEF": 0.5, "MAX_GRAD_NORM": 0.25, "ACTIVATION": "relu",
    "ENV_NAME": "HeuristicEnemySMAX", "MAP_NAME": "2s3z", "SEED": 0, "NUM_SEEDS": 1,
    "ENV_KWARGS": {"see_enemy_actions": True, "walls_cause_death": True, "attack_mode": "closest"}, "ANNEAL_LR": True,
}

# docs/ecosystem.md's changes for ippo_rnn_smax.py, and nothing else: the env id, SMAX's own ENV_KWARGS dropped
SMAX_DOC_CHANGES = {"ENV_NAME": "nexus-v0", "ENV_KWARGS": {}}

TOY_SIZES = {"NUM_ENVS": 2, "NUM_STEPS": 4, "TOTAL_TIMESTEPS": 16, "NUM_MINIBATCHES": 2, "UPDATE_EPOCHS": 1,
             "GRU_HIDDEN_DIM": 8, "FC_DIM_SIZE": 8}  # sizes only, so the test compiles in seconds


def test_ippo_ff_mpe_config_with_the_documented_changes_trains():
    """ippo_ff_mpe.py's set-up on its yaml with docs/ecosystem.md's changes (ENV_NAME, ENV_KWARGS compact), its
    `MPELogWrapper` (= LogWrapper for one agent), then experiments/ecosystem/ippo_ff.py (its data path and update) for two updates.
    Sizes shrunk, and max_steps 4 so episodes end inside them."""
    config = {**IPPO_FF_MPE_YAML, "ENV_NAME": "nexus-v0", "ENV_KWARGS": {"action_format": "compact"},
              "NUM_ENVS": 2, "NUM_STEPS": 4, "TOTAL_TIMESTEPS": 16, "NUM_MINIBATCHES": 2, "UPDATE_EPOCHS": 1}
    env = baselines.MPELogWrapper(nexus_jax.make(config["ENV_NAME"], **config["ENV_KWARGS"], max_steps=4))
    out = jax.jit(ippo.make_train(config, env))(jax.random.PRNGKey(config["SEED"]))
    m = jax.tree.map(np.asarray, out["metrics"])
    assert m["returned_episode"].shape == (2,) and m["returned_episode"].max() > 0
    assert np.isfinite(m["total_loss"]).all() and 0 < m["invalid"].mean() < 0.95  # BAD_TYPE flood: ~1.0


def test_ippo_rnn_smax_config_with_the_documented_changes_trains():
    """ippo_rnn_smax.py's `make_train` set-up on its yaml with the documented changes: the make line on
    config["ENV_NAME"] / config["ENV_KWARGS"], NUM_ACTORS, SCALE_CLIP_EPS, SMAXLogWrapper, then its data path
    (experiments/ecosystem/ippo_rnn_masked.py) and the callback's metric reshape (NUM_STEPS, NUM_ENVS, num_agents)."""
    config = {**IPPO_RNN_SMAX_YAML, **SMAX_DOC_CHANGES, **TOY_SIZES}
    env = nexus_jax.make(config["ENV_NAME"], **config["ENV_KWARGS"])
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
        nexus_jax.make("nexus-v0", **IPPO_RNN_SMAX_YAML["ENV_KWARGS"])

"""network=entity: the config picks the entity env view and network, checks what it needs, and PPO trains it."""
import jax
import numpy as np
import pytest

from train.config import ConfigError, load_config
from train.entity_env import EntityLearnerEnv
from train.entity_net import EntityActorCritic
from train.models import make_learner_env, make_policy
from train.networks import ActorCritic
from train.ppo import make_train

TINY = ["network=entity", "hidden_size=8", "num_envs=2", "num_steps=4", "total_timesteps=16", "num_minibatches=2",
        "update_epochs=1", "progress=false", "lr=0.01"]


def test_default_network_is_the_mlp():
    cfg = load_config()
    assert cfg.network == "mlp" and isinstance(make_policy(cfg, make_learner_env(cfg)), ActorCritic)


@pytest.mark.parametrize("override, key", [("critic=mappo", "critic"), ("action_head=flat", "action_head"),
                                           ("share_params=false", "share_params"), ("network=gnn", "network")])
def test_entity_needs_its_settings(override, key):
    with pytest.raises(ConfigError, match=key):
        load_config(overrides=TINY + [override])


@pytest.mark.slow
def test_ppo_trains_the_entity_network():
    cfg = load_config(overrides=TINY)
    env = make_learner_env(cfg)
    assert isinstance(env, EntityLearnerEnv) and isinstance(make_policy(cfg, env), EntityActorCritic)
    out = jax.jit(make_train(cfg))(jax.random.PRNGKey(0))
    m = jax.device_get(out["metrics"])
    assert m["entropy"].shape == (cfg.num_updates,) and np.isfinite(m["entropy"]).all() and m["entropy"].min() > 0
    assert np.isfinite(m["value_loss"]).all() and np.isfinite(m["approx_kl"]).all()
    enc = out["params"]["actor"]["params"]["encoder"]
    assert set(enc) >= {"own_0", "event_0", "msg_actor", "msg_target", "seat_0", "seat_1", "context"}

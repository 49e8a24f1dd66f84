"""Config: YAML defaults, key=value overrides, and validation errors that name the key (no compilation)."""
import pytest

import nexus_jax
from train.config import ConfigError, PPOConfig, load_config, parse_overrides


def test_defaults_load_and_match_dataclass_fields():
    cfg = load_config()
    assert isinstance(cfg, PPOConfig)
    assert cfg.env_id == nexus_jax.DEFAULT_ENV == "nexus-v2" and cfg.action_head in ("factored", "flat")
    assert cfg.num_updates >= 1


def test_overrides_parse_yaml_values_and_env_keys():
    o = parse_overrides(["lr=1e-3", "num_envs=8", "share_params=false", "lrs=[1e-3, 3e-4]", "env.num_agents=3",
                         "critic=mappo"])
    assert o == {"lr": 1e-3, "num_envs": 8, "share_params": False, "lrs": [1e-3, 3e-4], "env": {"num_agents": 3},
                 "critic": "mappo"}
    cfg = load_config(overrides=["lr=1e-3", "lrs=[1e-3, 3e-4]", "critic=mappo", "total_timesteps=64000"])
    assert cfg.lr == 1e-3 and cfg.sweep_lrs == (1e-3, 3e-4) and cfg.critic == "mappo"


@pytest.mark.parametrize("override, key", [
    ("learning_rate=0.1", "learning_rate"),  # unknown key
    ("lr=-1", "lr"),
    ("lr=fast", "lr"),
    ("num_envs=2.5", "num_envs"),
    ("action_head=tree", "action_head"),
    ("critic=central", "critic"),
    ("gamma=1.5", "gamma"),
    ("share_params=maybe", "share_params"),
    ("num_minibatches=7", "num_minibatches"),  # does not divide num_envs * num_steps
    ("total_timesteps=10", "total_timesteps"),
    ("lrs=[0.001, -2]", "lrs"),
    ("env_id=nexus-v9", "env_id"),
    ("env.p_solar_flare=1.5", "env"),  # the env's own validation, surfaced under the 'env' key
    ("env.no_such_param=1", "env"),
    ("type_prior=[0, 2]", "type_prior"),  # one number per action type (8 on nexus)
    ("type_prior=[0, 0, 2, 0, 0, 0, 0, .nan]", "type_prior"),
    ("memory=lstm", "memory"),
    ("memory_size=0", "memory_size"),
])
def test_bad_values_fail_naming_the_key(override, key):
    with pytest.raises(ConfigError, match=repr(key)):
        load_config(overrides=[override])


def test_memory_keys_pick_the_core_and_minibatches_of_whole_sequences():
    from train.memory import memory_size

    assert memory_size(load_config()) == 0 and not load_config().recurrent  # the default: feedforward
    cfg = load_config(overrides=["memory=gru", "memory_size=32"])
    assert cfg.recurrent and memory_size(cfg) == 32
    with pytest.raises(ConfigError, match=r"'memory': must be one of \('none', 'gru'\), got 'lstm'"):
        load_config(overrides=["memory=lstm"])
    load_config(overrides=["num_envs=6", "num_minibatches=4"])  # feedforward: minibatches of steps, 600 / 4
    with pytest.raises(ConfigError, match=r"'num_minibatches': with memory=gru a minibatch is whole env sequences"):
        load_config(overrides=["memory=gru", "num_envs=6", "num_minibatches=4"])
    from train.pipeline import load_pipeline_config

    assert load_pipeline_config(overrides=["memory=gru"]).ppo.memory == "gru"  # every stage's policy
    with pytest.raises(ConfigError, match=r"'bc\.num_minibatches': with memory=gru"):
        load_pipeline_config(overrides=["memory=gru", "bc.num_envs=6", "bc.num_minibatches=4"])


def test_env_error_names_the_env_field():
    with pytest.raises(ConfigError, match="p_solar_flare"):
        load_config(overrides=["env.p_solar_flare=1.5"])


def test_main_command_rejects_bad_config_before_compiling(capsys, monkeypatch):
    import train.__main__ as cli

    def boom(*a, **k):  # building the trainer means it got past validation
        raise AssertionError("compiled despite a bad config")

    monkeypatch.setattr(cli, "make_runs", boom)
    assert cli.main(["nonsense_key=1"]) == 2
    assert "'nonsense_key'" in capsys.readouterr().err


@pytest.mark.parametrize("override, key", [
    ("bc.hedge_prob=1.5", "hedge_prob"),
    ("bc.dagger_rounds=-1", "dagger_rounds"),
    ("bc.epochs=ten", "epochs"),
    ("grpo.invalid_penalty=-2", "invalid_penalty"),
    ("ppo.total_timesteps=1000", "total_timesteps"),  # set by the pipeline (GRPO's budget)
    ("ppo.memory=gru", "ppo.memory"),  # the pipeline's network key, at the top level
    ("memory=lstm", "memory"),
    ("network=bogus", r"'network': must be one of \('mlp', 'entity'\)"),
    ("network=slot", r"'network': must be one of \('mlp', 'entity'\)"),  # slot scores the flat head
    ("ppo.network=entity", "ppo.network"),  # set at the top level, for every stage
])
def test_pipeline_config_errors_name_the_key(override, key):
    from train.pipeline import load_pipeline_config

    cfg = load_pipeline_config()  # the shipped defaults are valid
    assert cfg.ppo.total_timesteps == cfg.grpo.num_updates * cfg.grpo.num_groups * cfg.grpo.group_size * 50
    with pytest.raises(ConfigError, match=key):
        load_pipeline_config(overrides=[override])


def test_every_section_goes_through_one_mechanism_naming_section_and_key():
    from train.config import BCConfig, GRPOConfig, build

    assert build(GRPOConfig, {}) == GRPOConfig() and build(BCConfig, {}, "bc") == BCConfig()  # defaults: the dataclass's
    assert build(BCConfig, {"lr": "1e-3"}, "bc").lr == 1e-3  # YAML 1.1 reads 1e-3 as a string
    with pytest.raises(ConfigError, match=r"'grpo\.nope': unknown key"):
        build(GRPOConfig, {"nope": 1}, "grpo")
    with pytest.raises(ConfigError, match=r"'bc\.epochs': must be an integer"):
        build(BCConfig, {"epochs": 1.5}, "bc")
    with pytest.raises(ConfigError, match=r"'grpo\.num_minibatches': must divide"):
        build(GRPOConfig, {"num_groups": 3, "num_minibatches": 2}, "grpo")
    with pytest.raises(ConfigError, match=r"'num_envs': must be > 0"):
        build(PPOConfig, {"num_envs": 0})


def test_pipeline_ppo_section_takes_the_pipeline_network_and_names_its_keys():
    from train.pipeline import load_pipeline_config

    cfg = load_pipeline_config(overrides=["hidden_size=32", "activation=relu"])
    assert (cfg.ppo.hidden_size, cfg.ppo.activation, cfg.ppo.env) == (32, "relu", cfg.env)
    assert cfg.network == cfg.ppo.network == "mlp"
    assert load_pipeline_config(overrides=["network=entity"]).ppo.network == "entity"
    with pytest.raises(ConfigError, match=r"'ppo\.nope'"):
        load_pipeline_config(overrides=["ppo.nope=1"])
    with pytest.raises(ConfigError, match=r"'activation'"):
        load_pipeline_config(overrides=["activation=gelu"])

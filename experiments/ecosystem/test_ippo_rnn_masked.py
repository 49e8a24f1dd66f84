"""experiments.ecosystem.ippo_rnn_masked (the `jaxmarl` extra): a tiny masked-GRU training, its params saved and restored
through the tree `--params` traces, and the evaluation's action-type shares (flat format)."""
import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nexus_jax

pytestmark = pytest.mark.slow  # a study's reproduction: the full tier (python -m pytest -m slow; CI runs it)

rnn = pytest.importorskip("experiments.ecosystem.ippo_rnn_masked")  # imports jaxmarl


def test_params_roundtrip_and_action_type_shares():
    config = {"NUM_ENVS": 2, "NUM_STEPS": 4, "TOTAL_TIMESTEPS": 16, "NUM_MINIBATCHES": 2, "UPDATE_EPOCHS": 1,
              "GRU_HIDDEN_DIM": 8, "FC_DIM_SIZE": 8}
    base = nexus_jax.make("nexus-v0", max_steps=4)
    train, net = rnn.make_train(config, rnn.LogWrapper(base))
    keys = jnp.stack([jax.random.PRNGKey(0), jax.random.PRNGKey(1)])
    out = jax.jit(jax.vmap(train))(keys)
    restored = flax.serialization.from_bytes(jax.eval_shape(jax.vmap(train), keys)["params"],
                                             flax.serialization.to_bytes(out["params"]))
    jax.tree.map(np.testing.assert_array_equal, restored, out["params"])
    params = jax.tree.map(lambda x: x[0], restored)
    ev = rnn.evaluate(base, net, params, 8, episodes=4, seed=0)
    shares = ev["action_type_share"]
    assert ev["invalid_rate"] == 0.0 and set(shares) >= {"WAIT", "PROPOSE", "SIGNAL"}
    assert abs(sum(shares.values()) - 1.0) < 1e-3  # every step is one action of one type

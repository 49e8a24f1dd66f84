"""The PureJaxRL PPO port (experiments/ecosystem/purejaxrl_ppo.py) on nexus-v0's gymnax 0.0.x view, through
PureJaxRL's wrappers' data path (obs space checked against gymnax's Box, a 5-tuple step): a few updates."""
import jax
import numpy as np
import pytest

import nexus_jax

pytestmark = pytest.mark.slow  # a study's reproduction: the full tier (python -m pytest -m slow; CI runs it)

spaces = pytest.importorskip("gymnax.environments.spaces")
purejaxrl = pytest.importorskip("experiments.ecosystem.purejaxrl_ppo")  # imports jaxmarl (the `jaxmarl` extra)


def test_purejaxrl_ppo_trains_on_the_gymnax_view():
    base, p = nexus_jax.make_gymnax("nexus-v0", gymnax_v1=False, max_steps=6)
    config = {"NUM_ENVS": 4, "NUM_STEPS": 8, "TOTAL_TIMESTEPS": 64, "NUM_MINIBATCHES": 2, "UPDATE_EPOCHS": 1}
    out = jax.jit(purejaxrl.make_train(config, purejaxrl.PureJaxRLWrappers(base, spaces.Box), p, base.seat))(
        jax.random.PRNGKey(1))
    m = jax.tree.map(np.asarray, out["metrics"])
    assert m["invalid"].shape == (2,) and 0 < m["invalid"].mean() < 1  # unmasked flat picks, judged by the env
    assert np.isfinite(m["episode_return"]).all() and (m["episode_return"] != 0).any()  # episodes of 6 ended

"""JaxMARL imported before nexus_jax (JAX's backend started without nexus_jax's XLA:CPU scheduler flag): the IPPO-FF
port still trains in a fresh process, because its programs (and the library's trainers) make no batched LAPACK
call, the pattern that hangs XLA:CPU's concurrency-optimized scheduler (docs/performance.md)."""
import os
import subprocess
import sys

import pytest

from nexus_jax import xla_flags

pytestmark = pytest.mark.slow  # a study's reproduction: the full tier (python -m pytest -m slow; CI runs it)


def _run(code: str, flags: str = "", timeout: int = 120):
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": flags, "PYTHONWARNINGS": "default",
           "PYTHONPATH": os.getcwd()}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)


JAXMARL_FIRST = """
import re, warnings
import jaxmarl, jax, jax.numpy as jnp
jnp.zeros(1)  # JAX's backend starts here, before nexus_jax: XLA_FLAGS are read and fixed without its flag
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import nexus_jax
from jaxmarl.wrappers.baselines import LogWrapper
from experiments.ecosystem import ippo_ff
env = LogWrapper(nexus_jax.make("nexus-v0"))
config = {"NUM_ENVS": 4, "NUM_STEPS": 8, "TOTAL_TIMESTEPS": 96, "NUM_MINIBATCHES": 2, "UPDATE_EPOCHS": 2}
keys = jax.random.split(jax.random.PRNGKey(0), 2)
lowered = jax.jit(jax.vmap(ippo_ff.make_train(config, env))).lower(keys)
ranks = re.findall(r"custom_call @lapack_\\w+\\(.*: \\(tensor<((?:\\d+x)+)", lowered.as_text())
out = lowered.compile()(keys)
loss = jax.block_until_ready(out["metrics"]["total_loss"])
print("late", any("cannot apply" in str(w.message) for w in caught), "lapack", bool(ranks),
      "batched", sum(d.count("x") > 2 for d in ranks), loss.shape, bool(jnp.isfinite(loss).all()))
"""


def test_jaxmarl_imported_first_ippo_ff_trains_without_the_workaround():
    """JaxMARL's IPPO-FF data path (our port: LogWrapper, batchify, vmapped env.step over 2 seeds, 3 PPO updates)
    in a fresh process that started JAX's backend before importing nexus_jax, so XLA:CPU's concurrency-optimized
    scheduler is on. Its QRs (orthogonal init, 6 layers) are unbatched, so the pool cannot starve: the program
    `python -m train` compiled hung here before (10 layers' batched QRs, every thread asleep)."""
    pytest.importorskip("jaxmarl")
    out = _run(JAXMARL_FIRST, xla_flags.FAST_COMPILE, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "late True lapack True batched 0 (2, 3) True", out.stdout

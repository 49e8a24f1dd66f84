"""`python -m nexus_jax.xla_check`: does the installed jax hang on CPU the way vmapped training can, and does the flag help?

The program is the one users meet, with jax and flax alone: flax's orthogonal initializer under
`jax.vmap` over seeds (an MLP of `layers` Dense layers, jitted), which makes one batched QR per layer.
With jaxlib 0.10 on XLA:CPU's concurrency-optimized scheduler (XLA's default) the independent QRs
start together, each blocks its pool thread until its parts are done, and once every pool thread
is such a caller the process sleeps forever (`nexus_jax/xla_flags.py` has the mechanism). It runs
twice, in fresh processes on the CPU and at once: with the scheduler as XLA ships it, and with
`xla_flags.SCHEDULER_OFF`, the flag `import nexus_jax` sets. A run that has not returned after
`--timeout` seconds is killed and counted as hung. Nothing here imports nexus_jax in the child
processes, so the result is the installed jax's, not ours.

The verdict is for this program on this machine: the hang needs more independent LAPACK calls than
XLA:CPU has pool threads, so the default layer count grows with the cores (`default_layers`), and
"did not hang" does not prove that no program can.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from typing import NamedTuple, Optional

from nexus_jax.xla_flags import SCHEDULER_OFF

FLAG_NAME = SCHEDULER_OFF.split("=", 1)[0]

PROGRAM = """
import sys
import jax, jax.numpy as jnp
import flax.linen as nn

layers, seeds, width = (int(a) for a in sys.argv[1:4])

class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        for _ in range(layers):
            x = nn.Dense(width, kernel_init=nn.initializers.orthogonal())(x)
        return x

init = jax.jit(jax.vmap(lambda key: MLP().init(key, jnp.zeros((1, width)))))
jax.block_until_ready(init(jax.random.split(jax.random.PRNGKey(0), seeds)))
print("returned", jax.__version__, flush=True)
"""


def default_layers() -> int:
    """One more independent QR than this machine has cores, and at least 10 (what hung on 2 cores)."""
    return max(10, (os.cpu_count() or 1) + 2)


class Run(NamedTuple):
    flags: str  # the XLA_FLAGS the child ran with
    returned: bool  # it finished in time with exit 0
    hung: bool  # killed at the timeout
    seconds: float
    error: str  # the tail of stderr when it failed (not when it hung)


class Result(NamedTuple):
    default: Run  # XLA's own scheduler
    flag: Run  # with SCHEDULER_OFF
    layers: int
    seeds: int
    timeout: float


def _flags_without_ours(flags: str) -> str:
    return " ".join(f for f in flags.split() if f.split("=", 1)[0] != FLAG_NAME)


def child_env(with_flag: bool, base: Optional[dict] = None) -> dict:
    """The environment of one run: the caller's (or `base`), on the CPU, `XLA_FLAGS` with or without the flag."""
    env = dict(os.environ if base is None else base)
    flags = _flags_without_ours(env.get("XLA_FLAGS", ""))
    env["XLA_FLAGS"] = f"{flags} {SCHEDULER_OFF}".strip() if with_flag else flags
    env["JAX_PLATFORMS"] = "cpu"
    return env


def check(layers: Optional[int] = None, seeds: int = 2, width: int = 64, timeout: float = 60.0) -> Result:
    """Run `PROGRAM` without and with the flag, side by side in two processes -> a `Result`."""
    layers = default_layers() if layers is None else layers
    argv = [sys.executable, "-c", PROGRAM, str(layers), str(seeds), str(width)]
    envs = [child_env(False), child_env(True)]
    start = time.monotonic()
    procs = [subprocess.Popen(argv, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for e in envs]
    ended = [None] * len(procs)  # seconds each took (its output is a few lines: the pipes cannot fill)
    while None in ended and time.monotonic() - start < timeout:
        for i, proc in enumerate(procs):
            if ended[i] is None and proc.poll() is not None:
                ended[i] = time.monotonic() - start
        time.sleep(0.05)
    runs = []
    for proc, env, took in zip(procs, envs, ended):
        hung = took is None
        if hung:
            proc.kill()
        out, err = proc.communicate()
        ok = not hung and proc.returncode == 0 and "returned" in out
        runs.append(Run(env["XLA_FLAGS"], ok, hung, round(timeout if hung else took, 1),
                        "" if ok or hung else err.strip()[-2000:]))
    return Result(runs[0], runs[1], layers, seeds, timeout)


def verdict(result: Result) -> str:
    """One line: HANGS, does not hang, or why there is no answer."""
    d, f = result.default, result.flag
    what = f"flax orthogonal init of {result.layers} layers under vmap over {result.seeds} seeds, jitted, on CPU"
    if d.error or f.error:
        return f"no verdict: the program failed ({(d.error or f.error).splitlines()[-1]})"
    if f.hung:
        return (f"no verdict: even with {SCHEDULER_OFF} the program did not return in {result.timeout:g} s "
                f"(a slow or loaded machine: raise --timeout)")
    if d.hung:
        return (f"HANGS: {what} never returns with XLA's default scheduler (killed after {result.timeout:g} s) "
                f"and returns in {f.seconds:g} s with {SCHEDULER_OFF}. Import nexus_jax before anything starts "
                f"JAX's backend (e.g. before jaxmarl), or set XLA_FLAGS={SCHEDULER_OFF} before starting Python.")
    return (f"does not hang here: {what} returns with XLA's default scheduler ({d.seconds:g} s) and with "
            f"{SCHEDULER_OFF} ({f.seconds:g} s)")


def report(result: Result) -> str:
    header = f"jax and flax in fresh processes ({sys.executable}), {os.cpu_count()} cores"
    rows = [f"{name:<22} XLA_FLAGS={run.flags!r}: " + ("returned" if run.returned else "HUNG" if run.hung else
                                                        "failed") + f" ({run.seconds:g} s)"
            for name, run in (("default scheduler", result.default), ("scheduler off (ours)", result.flag))]
    return "\n".join([header, *rows, "verdict: " + verdict(result)])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nexus_jax.xla_check", description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=None, help=f"Dense layers (default {default_layers()} here)")
    ap.add_argument("--seeds", type=int, default=2, help="the vmapped batch (default 2)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds before a run counts as hung (default 60)")
    args = ap.parse_args(argv)
    print(report(check(args.layers, args.seeds, timeout=args.timeout)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

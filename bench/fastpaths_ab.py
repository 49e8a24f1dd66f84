"""The XLA:CPU fast paths against plain JAX, in one process: `python -m bench.fastpaths_ab [--agents 4]
[--batch 1024] [--steps 20] [--rounds 6] [--masks] [--clock cpu]`.

Both forms of nexus-v0's vmapped env.step (`nexus_jax.fastpaths` "on" and "off"; with `--masks`, the
learner's factored masks each step too) are compiled, checked for the same checksum, then timed one call
of each per round, alternating which runs first. Prints each round's env-steps/s and the median ratio of
the plain form's time to the fast form's, with its range (how far the machine's noise reaches).
"""
from __future__ import annotations

import jax
import numpy as np

import nexus_jax
from bench.common import CLOCKS, timed
from bench.speed import learner_rollout
from nexus_jax import fastpaths
from nexus_jax.cli import ArgumentParser, entry_point, positive_int


def compiled(mode: str, agents: int, batch: int, steps: int, masks: bool):
    """The rollout traced under `mode` by a fresh env (env.step keeps the program of its first trace)."""
    with fastpaths.use(mode):
        env = nexus_jax.make("nexus-v0", num_agents=agents)
        return jax.jit(learner_rollout(env, batch, steps, masks)).lower(jax.random.PRNGKey(0)).compile()


@entry_point("python -m bench.fastpaths_ab")
def main(argv=None):
    ap = ArgumentParser(prog="python -m bench.fastpaths_ab", description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=positive_int, default=4)
    ap.add_argument("--batch", type=positive_int, default=1024)
    ap.add_argument("--steps", type=positive_int, default=20)
    ap.add_argument("--rounds", type=positive_int, default=6)
    ap.add_argument("--masks", action="store_true", help="the learner's factored masks each step too")
    ap.add_argument("--clock", choices=tuple(CLOCKS), default="cpu")
    args = ap.parse_args(argv)
    key = jax.random.PRNGKey(0)
    fns = {mode: compiled(mode, args.agents, args.batch, args.steps, args.masks) for mode in ("on", "off")}
    sums = {mode: float(fn(key)) for mode, fn in fns.items()}
    print(f"{fastpaths.describe()}\nchecksums: fast {sums['on']!r}, plain {sums['off']!r}", flush=True)
    ratios, env_steps = [], args.batch * args.steps
    for r in range(args.rounds):
        order = ("on", "off") if r % 2 == 0 else ("off", "on")
        t = {mode: timed(fns[mode], key, reps=1, clock=args.clock) for mode in order}
        ratios.append(t["off"] / t["on"])
        print(f"round {r}: fast {env_steps / t['on']:,.0f} env-steps/s, plain {env_steps / t['off']:,.0f}; "
              f"plain/fast time {ratios[-1]:.2f}", flush=True)
    print(f"N={args.agents}, {args.batch} envs{', masks' if args.masks else ''}: plain takes "
          f"{np.median(ratios):.2f}x the fast time (range {min(ratios):.2f}-{max(ratios):.2f})")
    return 0 if sums["on"] == sums["off"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

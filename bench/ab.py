"""Before/after in one process: `nexus_jax` at a git revision vs the working tree, interleaved.

    python -m bench.ab d6ae9f9 [--batch 4096] [--steps 100] [--rounds 3] [--agents 4]

The package at REV is exported (`git archive`) into a temporary folder under another name
(`nexus_jax_<rev>`, its imports renamed), so both versions live in one process and each row
(core with every seat acting, `make("nexus-v0").step`, the same with the learner's factored
masks each step) is compiled for both, then timed one call of each per round (best round
kept; each round alternates which of the two runs first, and the median of the rounds' paired
ratios is printed with their range, which says how far the machine's noise reaches: on the
2-core CPU the same program read 0.90-1.21x in single runs of the old fixed order). The
checksum of observations and rewards tells whether the two compute the same
trajectories, and the "program" column whether XLA compiled the same program (the optimized
HLO, names, numbering and source metadata aside): only then are results of the old version,
training runs included, bit for bit those of the new one. Prints a Markdown table.
"""
from __future__ import annotations

import difflib
import importlib
import io
import re
import subprocess
import sys
import tarfile
import tempfile
from functools import partial
from pathlib import Path

import jax
import numpy as np

from nexus_jax.cli import ArgumentParser, UserInputError, entry_point, positive_int
from bench.common import compile_timed, timed
from train.runtime import machine
from bench.env_throughput import nexus_core_run
from bench.speed import learner_rollout

ROOT = Path(__file__).resolve().parent.parent


def export(rev: str, into: Path) -> str:
    """Write nexus_jax at `rev` to `into/<name>` with every import renamed; -> the package name."""
    name = "nexus_jax_" + re.sub(r"\W", "_", rev)
    done = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "nexus_jax"], capture_output=True)
    if done.returncode:
        raise UserInputError(f"rev {rev!r}: git archive failed: {done.stderr.decode().strip()}")
    tar = done.stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        t.extractall(into, filter="data")
    (into / "nexus_jax").rename(into / name)
    for f in (into / name).rglob("*.py"):
        f.write_text(re.sub(r"\bnexus_jax\b", name, f.read_text()))
    return name


def program_text(compiled) -> str:
    """A compiled program's optimized HLO with what differs between identical programs removed:
    the stack-frame tables and source metadata, instruction and computation numbering."""
    lines = [line for line in compiled.as_text().splitlines()
             if line.startswith(("%", "ENTRY", "}", "  "))]  # the computations only
    text = re.sub(r", metadata=\{[^}]*\}", "", "\n".join(lines))
    text = re.sub(r"([%\w])\.\d+", r"\1", text)
    return re.sub(r"_\d+\b", "", text)


def program_diff(a, b) -> str:
    """'same', or how many lines of the normalized optimized HLO differ."""
    la, lb = program_text(a).splitlines(), program_text(b).splitlines()
    if la == lb:
        return "same"
    diff = difflib.unified_diff(la, lb, n=0, lineterm="")
    changed = sum(1 for x in diff if x[:1] in "+-" and x[:3] not in ("+++", "---"))
    return f"{changed} lines differ"


def paired_times(fns: dict, rounds: int, clock: str) -> dict:
    """{row: (before_fn, after_fn)} -> {row: [(t_before, t_after), ...]}, one pair per round, timed back to
    back; odd rounds time the "after" first, so neither arm always runs in the other's wake."""
    out = {row: [] for row in fns}
    for r in range(rounds):
        for row, (fa, fb) in fns.items():
            order = (fa, fb) if r % 2 == 0 else (fb, fa)
            t = [timed(f, reps=1, clock=clock) for f in order]
            out[row].append(tuple(t) if r % 2 == 0 else tuple(t[::-1]))
    return out


def summarize(pairs: list[tuple[float, float]]) -> dict:
    """Speed-ups (before / after) of one row: from the best time of each arm, and the median and range of the
    per-round paired ratios."""
    ratios = sorted(ta / tb for ta, tb in pairs)
    return {"best": min(ta for ta, _ in pairs) / min(tb for _, tb in pairs), "median": float(np.median(ratios)),
            "low": ratios[0], "high": ratios[-1]}


def core_rollout(pkg, batch: int, steps: int, agents: int = 4):
    """key -> checksum: `bench.env_throughput.nexus_core_run` over `pkg`'s functional core."""
    core = importlib.import_module(pkg.__name__ + ".envs.nexus.core")
    params = importlib.import_module(pkg.__name__ + ".envs.nexus.params").NexusParams.create(num_agents=agents)
    run = nexus_core_run(params, steps, core)
    return lambda key: run(jax.random.split(key, batch)).sum()


@entry_point("python -m bench.ab")
def main(argv=None):
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rev", help="the git revision to compare with (the 'before')")
    ap.add_argument("--batch", type=positive_int, default=4096)
    ap.add_argument("--steps", type=positive_int, default=100)
    ap.add_argument("--rounds", type=positive_int, default=3)
    ap.add_argument("--agents", type=positive_int, default=4, help="N, seats per env (3 of them NPCs at N=4)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: CPU seconds of this process (steadier than wall time when other jobs share the cores)")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="nexus_ab_"))
    sys.path.insert(0, str(tmp))
    before = importlib.import_module(export(args.rev, tmp))
    after = importlib.import_module("nexus_jax")
    b, steps, n, key = args.batch, args.steps, args.agents, jax.random.PRNGKey(1)
    rows = {
        f"core (all {n} seats act)": lambda pkg: core_rollout(pkg, b, steps, n),
        f"env.step (dict, auto-reset, {n - 1} NPCs)":
            lambda pkg: learner_rollout(pkg.make("nexus-v0", num_agents=n), b, steps, False),
        "env.step + factored masks": lambda pkg: learner_rollout(pkg.make("nexus-v0", num_agents=n), b, steps, True),
    }
    compiled = {}
    for row, build in rows.items():
        for tag, pkg in (("before", before), ("after", after)):
            compiled[row, tag] = compile_timed(build(pkg), key)
    times = paired_times({row: (partial(compiled[row, "before"][0], key), partial(compiled[row, "after"][0], key))
                          for row in rows}, args.rounds, args.clock)
    print(f"{args.rev} -> working tree, N={n}, B={b}, {steps} steps, {args.clock} clock, load {machine()['load_average_1_5_15']}")
    print("| row | before env-steps/s | after env-steps/s | speed-up (best) | paired: median (range) "
          "| compile s before / after | checksums | program |")
    print("|---|---:|---:|---:|---:|---:|---|---|")
    for row in rows:
        (fa, ca), (fb, cb) = compiled[row, "before"], compiled[row, "after"]
        ta, tb = (min(t[i] for t in times[row]) for i in (0, 1))
        sm = summarize(times[row])
        same = np.asarray(fa(key)) == np.asarray(fb(key))
        print(f"| {row} | {b * steps / ta:,.0f} | {b * steps / tb:,.0f} | {sm['best']:.2f}x | "
              f"{sm['median']:.2f}x ({sm['low']:.2f}-{sm['high']:.2f}) | {ca:.1f} / {cb:.1f} | "
              f"{'same' if same else 'differ'} | {program_diff(fa, fb)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

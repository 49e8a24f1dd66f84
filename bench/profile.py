"""Where a scanned step's time goes: kernel times from `jax.profiler`, each mapped to its source line.

    python -m bench.profile env --batch 4096 --steps 10      # env.step (1 learner + 3 NPCs)
    python -m bench.profile core | masks | mpe                # the other rows of bench/speed.py
    python -m bench.profile update --batch 64 --steps 100     # PPO's learning alone (configs/ppo.yaml, B envs)

Runs one row of `bench/speed.py`'s harness under `jax.profiler.trace`, takes each kernel's
self time (children excluded) from the trace, and maps the kernel back to Python through the
stack frames XLA keeps in the optimized HLO. Prints, per env-step: the top kernels with their
source, the time by source file, and the element-ops that more than one fusion evaluates (XLA
fused a producer into several consumers: work a stored-once value would save). Writes JSON.
Times under the profiler are inflated and the machine is shared: read the shares, and A/B any
change with `python -m bench.ab`.
"""
from __future__ import annotations

import collections
import glob
import gzip
import json
import math
import re
import shutil
import tempfile
from pathlib import Path

import jax

import nexus_jax
from nexus_jax.cli import ArgumentParser, entry_point, positive_int
from train.runtime import write_report
from bench.env_throughput import nexus_core_run
from bench.speed import learner_rollout, mpe_rollout, ppo_updates
from nexus_jax.envs.nexus.params import NexusParams
from train.config import load_config

OUT = Path(__file__).parent / "results" / "profile.json"
_FREE = {"parameter", "get-tuple-element", "tuple", "bitcast", "constant", "broadcast", "reshape", "slice", "iota",
         "transpose", "copy"}
PPO_ROWS = ("update", "rollout", "train")  # bench/speed.py's PPO rows (`speed.ppo_updates`)
_NOT_KERNELS = ("$", "ThunkExecutor", "Slinky", "PjRt", "TfrtCpu", "CommonPjRt", "Pjit", "Threadpool")


def build(row: str, batch: int, steps: int, agents: int):
    """-> (jitted fn, args, env-steps per call) of one bench/speed.py row."""
    key = jax.random.PRNGKey(0)
    if row in PPO_ROWS:  # one update's worth of env-steps: `batch` envs x `steps` (configs/ppo.yaml otherwise)
        cfg = load_config(overrides=[f"num_envs={batch}", f"num_steps={steps}", "progress=false",
                                     f"total_timesteps={batch * steps}", f"env.num_agents={agents}"])
        runner, parts = ppo_updates(cfg)
        return jax.jit(parts[row]), (runner,), batch * steps
    fn, args = _env_row(row, batch, steps, agents, key)
    return fn, args, batch * steps


def _env_row(row, batch, steps, agents, key):
    if row == "core":
        return jax.jit(nexus_core_run(NexusParams.create(num_agents=agents), steps)), (jax.random.split(key, batch),)
    if row == "mpe":
        return jax.jit(mpe_rollout(batch, steps)), (jax.random.split(key, batch),)
    env = nexus_jax.make("nexus-v0", num_agents=agents)
    return jax.jit(learner_rollout(env, batch, steps, row == "masks")), (key,)


def self_times(fn, args) -> dict[str, float]:
    """Kernel name -> self time in µs over one profiled call (after a warm-up call)."""
    jax.block_until_ready(fn(*args))
    folder = tempfile.mkdtemp(prefix="nexus_profile_")
    try:
        with jax.profiler.trace(folder, create_perfetto_trace=True):
            jax.block_until_ready(fn(*args))
        trace = glob.glob(folder + "/**/*.trace.json.gz", recursive=True)[0]
        events = [e for e in json.load(gzip.open(trace))["traceEvents"] if e.get("ph") == "X" and "dur" in e]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    by_thread = collections.defaultdict(list)
    for e in events:
        by_thread[e.get("pid"), e.get("tid")].append(e)
    own = collections.Counter()
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in evs:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
                stack.pop()
            if stack:
                own[stack[-1]["name"]] -= e["dur"]
            own[e["name"].replace("end: ", "")] += e["dur"]
            stack.append(e)
    return {k: v for k, v in own.items() if not k.startswith(_NOT_KERNELS)}


def kernel_kind(name: str, fused: str = "") -> str:
    """A kernel's kind: a matrix product (Eigen's dot, or a fusion whose computation `fused` has one: YNNPACK's),
    a YNNPACK reduction, sort, copy/transpose, gather, or a fusion XLA emitted itself."""
    base = re.sub(r"[.\d]+$", "", name)
    if base == "dot" or " dot(" in fused:
        return "matrix product"
    if base.startswith("ynn"):
        return "ynnpack reduction"
    for kind in ("sort", "gather", "transpose", "copy", "concatenate", "scatter"):
        if kind in base:
            return kind
    return "other XLA fusion" if "fusion" in base else base


class Sources:
    """Instruction name -> (shape, source frames innermost first), from an optimized HLO module's text."""

    def __init__(self, hlo: str):
        def table(name):
            return re.search(rf"\n{name}\n(.*?)\n\n", hlo, re.S).group(1)
        files = dict(re.findall(r'^(\d+) "(.*)"$', table("FileNames"), re.M))
        funcs = dict(re.findall(r'^(\d+) "(.*)"$', table("FunctionNames"), re.M))
        self.locs = {m[0]: (files[m[1]].split("/")[-1], funcs[m[2]].split(".<locals>")[0], m[3]) for m in
                     re.findall(r"^(\d+) \{file_name_id=(\d+) function_name_id=(\d+) line=(\d+)",
                                table("FileLocations"), re.M)}
        self.frames = {m[0]: (m[1], m[2]) for m in
                       re.findall(r"^(\d+) \{file_location_id=(\d+)(?: parent_frame_id=(\d+))?", table("StackFrames"), re.M)}
        self.ops, self.fused = {}, {}  # fusion name -> its computation's name
        for m in re.finditer(r"\n\s*(?:ROOT )?%([\w.\-]+) = (\S+) ([\w\-]+)\(([^\n]*)", hlo):
            name, shape, _, rest = m.groups()
            frame = re.search(r"stack_frame_id=(\d+)", rest)
            self.ops.setdefault(name, (shape.split("{")[0], frame.group(1) if frame else None))
            called = re.search(r"calls=%?([\w.\-]+)", rest)
            if called:
                self.fused.setdefault(name, called.group(1))
        self.comps = dict(re.findall(r"\n(?:ENTRY )?%?([\w.\-]+) [^\n]*\{\n(.*?)\n\}", hlo, re.S))
        bodies = re.findall(r"body=%?([\w.\-]+)", hlo)
        self.body = max((self.comps.get(b, "") for b in bodies), key=len) if bodies else ""

    def chain(self, frame) -> list[str]:
        out, seen = [], set()
        while frame and frame in self.frames and frame not in seen:
            seen.add(frame)
            loc, frame = self.frames[frame]
            file, func, line = self.locs[loc]
            out.append(f"{file}:{line}({func})")
        return out

    def where(self, name: str) -> str:
        """The innermost project frames of an instruction (jax's own and numpy's left out)."""
        frames = [f for f in self.chain(self.ops.get(name, ("", None))[1]) if not f.startswith(("api.py", "numpy"))]
        return " < ".join(frames[:3]) or "?"

    def duplicated(self, batch: int) -> collections.Counter:
        """Source expression -> element-ops per env of its copies beyond the first, over the scan body's fusions."""
        def elems(shape):
            m = re.match(r"\(?\w+\[([\d,]*)\]", shape)
            return math.prod(int(d) for d in m.group(1).split(",") if d) if m else 0

        def ops_of(comp, out):
            for m in re.finditer(r"= (\S+) ([\w\-]+)\(([^\n]*)", self.comps.get(comp, "")):
                shape, op, rest = m.groups()
                for sub in re.findall(r"calls=%?([\w.\-]+)", rest):
                    ops_of(sub, out)
                frame = re.search(r"stack_frame_id=(\d+)", rest)
                if op not in _FREE and op != "fusion" and frame:
                    out[(frame.group(1), op, shape.split("{")[0])] += elems(shape) / batch

        copies = collections.defaultdict(list)
        for m in re.finditer(r"%[\w.\-]+ = \S+ fusion\([^\n]*calls=%?([\w.\-]+)", self.body):
            found = collections.Counter()
            ops_of(m.group(1), found)
            for k, w in found.items():
                copies[k].append(w)
        waste = collections.Counter()
        for (frame, op, shape), ws in copies.items():
            if len(ws) > 1:
                waste[" < ".join(self.chain(frame)[:2]) + f"  {op} {shape} x{len(ws)}"] += sum(sorted(ws)[:-1])
        return waste


@entry_point("python -m bench.profile")
def main(argv=None):
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("row", choices=("core", "env", "masks", "mpe", *PPO_ROWS))
    ap.add_argument("--batch", type=positive_int, default=4096)
    ap.add_argument("--steps", type=positive_int, default=10)
    ap.add_argument("--agents", type=positive_int, default=4)
    ap.add_argument("--top", type=positive_int, default=25)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    fn, call_args, env_steps = build(args.row, args.batch, args.steps, args.agents)
    src = Sources(fn.lower(*call_args).compile().as_text())
    times = self_times(fn, call_args)
    per = 1e3 / env_steps  # µs over the call -> ns per env-step
    total = sum(times.values()) * per
    print(f"{args.row}: B={args.batch} N={args.agents} {args.steps} steps; kernel time {total:,.0f} ns per env-step "
          f"(under the profiler)")
    top = sorted(times.items(), key=lambda kv: -kv[1])[:args.top]
    for name, t in top:
        print(f"{t * per:8.0f} ns {100 * t * per / total:5.1f}%  {name[:30]:30s} {src.ops.get(name, ('?',))[0][:22]:22s} "
              f"{src.where(name)}")
    by_file = collections.Counter()
    for name, t in times.items():
        frames = src.where(name).split(" < ")[0]
        by_file[frames.split(":")[0] if frames != "?" else "? (" + re.sub(r"\.\d+$", "", name) + ")"] += t * per
    print("by source file:")
    for f, t in by_file.most_common(15):
        print(f"{t:8.0f} ns {100 * t / total:5.1f}%  {f}")
    by_kind = collections.Counter()
    for name, t in times.items():
        by_kind[kernel_kind(name, src.comps.get(src.fused.get(name, ""), ""))] += t * per
    print("by kernel kind:")
    for k, t in by_kind.most_common(8):
        print(f"{t:8.0f} ns {100 * t / total:5.1f}%  {k}")
    waste = src.duplicated(env_steps // args.steps)
    print(f"element-ops per env-step evaluated by more than one fusion: {sum(waste.values()):,.0f}; the largest:")
    for k, w in waste.most_common(12):
        print(f"{w:8,.0f}  {k}")
    write_report(args.out, {"args": {k: str(v) for k, v in vars(args).items()}, "ns_per_env_step": total,
                            "top": [{"kernel": n, "ns": t * per, "source": src.where(n)} for n, t in top],
                            "by_file_ns": dict(by_file), "by_kind_ns": dict(by_kind),
                            "duplicated_element_ops": dict(waste.most_common(50))},
                 indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

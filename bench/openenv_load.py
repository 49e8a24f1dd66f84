"""Load test of the OpenEnv server on loopback: N concurrent WebSocket sessions stepping for T seconds.

`python -m bench.openenv_load [--sessions 64] [--seconds 10] [--env nexus-v0]`. Starts the
server in this process (127.0.0.1, a free port, `max_concurrent_envs = sessions`), opens every
session at once, and has each reset with its own seed and then step replies from a fixed list
(valid, invalid and unparseable ones) as fast as the server answers, resetting at episode end.
Reports steps/s and per-step latency percentiles, and checks what the issue asks of the server:

- isolation: every observation's `step` equals that session's own count since its reset
  (a state crossing between sessions would break it);
- nothing lost: every request gets a reply, and no error replies;
- nothing leaked: after every session closes, `sessions` new ones can all open (the capacity
  is free again), and the process RSS growth is reported.

Prints a JSON summary and writes it to bench/results/openenv_load.json (`--out`).
"""
from __future__ import annotations

import asyncio
import json
import random
import time
from pathlib import Path

import numpy as np
from websockets.asyncio.client import connect

from train.runtime import write_report
from nexus_jax.adapters.openenv import serve
from nexus_jax.cli import ArgumentParser, entry_point, positive_int

OUT = Path(__file__).parent / "results" / "openenv_load.json"
REPLIES = ("WAIT", "WORK E", "WORK C", "PROPOSE 2 10E 5C", "ACCEPT 1", "REJECT 3", "VAULT 2E", "UNVAULT 1C",
           "SIGNAL 3 5E 5C", "hmm, no idea", "PROPOSE 0 1E 1C")


def rss_mib() -> float:
    """This process's resident memory (server threads included), from /proc."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def session(url: str, seed: int, stop_at: float, out: dict) -> None:
    """One client: reset, then step until `stop_at`; records latencies, counts and isolation breaks."""
    rng = random.Random(seed)
    async with connect(url, max_size=None) as ws:
        async def call(msg: dict) -> dict:
            t = time.perf_counter()
            await ws.send(json.dumps(msg))
            reply = json.loads(await ws.recv())
            out["latency"].append(time.perf_counter() - t)
            if reply.get("type") == "error":
                out["errors"].append(reply["data"])
            return reply

        reply = await call({"type": "reset", "data": {"seed": seed}})
        own = 0
        while time.perf_counter() < stop_at:
            reply = await call({"type": "step", "data": {"message": rng.choice(REPLIES)}})
            if reply.get("type") != "observation":
                continue
            own += 1
            out["steps"] += 1
            if reply["data"]["observation"]["step"] != own:
                out["crossed"] += 1
            if reply["data"].get("done"):
                await call({"type": "reset", "data": {"seed": seed + 1000 * own}})
                own = 0


async def reopen_all(url: str, n: int) -> int:
    """Open n sessions at once, reset each and step once; -> how many got observations for both."""
    async def one() -> bool:
        async with connect(url) as ws:
            ok = True
            for msg in ({"type": "reset", "data": {}}, {"type": "step", "data": {"message": "WAIT"}}):
                await ws.send(json.dumps(msg))
                ok &= json.loads(await ws.recv()).get("type") == "observation"
            return ok

    return sum(await asyncio.gather(*(one() for _ in range(n))))


async def run(url: str, sessions: int, seconds: float) -> dict:
    outs = [{"latency": [], "errors": [], "steps": 0, "crossed": 0} for _ in range(sessions)]
    t0 = time.perf_counter()
    await asyncio.gather(*(session(url, s, t0 + seconds, outs[s]) for s in range(sessions)))
    wall = time.perf_counter() - t0
    lat = np.concatenate([np.asarray(o["latency"]) for o in outs]) * 1000
    steps = sum(o["steps"] for o in outs)
    return {"sessions": sessions, "seconds": round(wall, 2), "steps": steps, "steps_per_s": round(steps / wall, 1),
            "latency_ms": {p: round(float(np.percentile(lat, q)), 2) for p, q in
                           (("p50", 50), ("p90", 90), ("p99", 99), ("max", 100))},
            "requests": int(lat.size), "error_replies": sum(len(o["errors"]) for o in outs),
            "isolation_breaks": sum(o["crossed"] for o in outs),
            "min_steps_per_session": min(o["steps"] for o in outs)}


@entry_point("python -m bench.openenv_load")
def main(argv=None) -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=positive_int, default=64)
    ap.add_argument("--seconds", type=positive_int, default=10)
    ap.add_argument("--env", default="nexus-v0")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    with serve(args.env, max_concurrent_envs=args.sessions) as server:
        url = server.url.replace("http://", "ws://") + "/ws"
        asyncio.run(reopen_all(url, 1))  # compile reset and step before timing
        rss0 = rss_mib()
        result = asyncio.run(run(url, args.sessions, args.seconds))
        rss1 = rss_mib()
        result["reopened_after_close"] = asyncio.run(reopen_all(url, args.sessions))
        result["rss_mib"] = {"before": round(rss0, 1), "after_load": round(rss1, 1), "after_reopen": round(rss_mib(), 1)}
    result.update(env=args.env, host=server.host)
    print(json.dumps(result, indent=1))
    write_report(args.out, result)
    ok = (result["error_replies"] == 0 and result["isolation_breaks"] == 0
          and result["reopened_after_close"] == args.sessions)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

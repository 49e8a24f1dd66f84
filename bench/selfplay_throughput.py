"""Self-play throughput of the entity network: every seat a learner, one shared policy, agent-steps/s by N.

For each N, `make_train` (rollout + GAE + PPO epochs) on nexus-selfplay-v0 with
`num_agents=N` and `network=entity`, timed on a second call after compilation
(`bench.train_throughput.train_rate`). Agent-steps/s = env steps/s x N (every seat acts
and learns each step). Writes bench/results/selfplay_throughput.json.

    python -m bench.selfplay_throughput [--seats 4 16 64] [--envs 8] [--steps 20] [--updates 2] [key=value ...]
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from train.runtime import machine, write_report  # noqa: E402
from bench.train_throughput import train_rate  # noqa: E402
from nexus_jax.cli import ArgumentParser, entry_point, positive_int  # noqa: E402
from train.config import load_config  # noqa: E402


@entry_point("python -m bench.selfplay_throughput")
def main(argv=None):
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seats", type=positive_int, nargs="+", default=[4, 16, 64])
    ap.add_argument("--envs", type=positive_int, default=8)
    ap.add_argument("--steps", type=positive_int, default=20, help="rollout length (num_steps)")
    ap.add_argument("--updates", type=positive_int, default=2)
    ap.add_argument("overrides", nargs="*", help="config key=value (configs/ppo.yaml keys)")
    args = ap.parse_args(argv)
    rows = []
    for n in args.seats:
        cfg = load_config(overrides=["network=entity", "env_id=nexus-selfplay-v0", f"env.num_agents={n}",
                                     f"num_envs={args.envs}", f"num_steps={args.steps}", "num_minibatches=2",
                                     f"total_timesteps={args.envs * args.steps * args.updates}", "progress=false",
                                     *args.overrides])
        rate, compile_s = train_rate(cfg)
        rows.append({"num_agents": n, "env_steps_per_s": rate, "agent_steps_per_s": rate * n, "compile_s": compile_s})
        print(f"N={n}: {rate:,.0f} env steps/s = {rate * n:,.0f} agent-steps/s (compile {compile_s:.0f} s)", flush=True)
    meta = {**machine(), "num_envs": args.envs, "num_steps": args.steps, "updates": args.updates,
            "overrides": args.overrides, "hidden_size": cfg.hidden_size}
    write_report(Path(__file__).resolve().parent / "results" / "selfplay_throughput.json",
                 {"meta": meta, "rows": rows}, indent=2)


if __name__ == "__main__":
    main()

"""`python -m experiments.research.questions RUN_DIR [--episodes 1000]`: the research questions of docs/research.md on a trained run, 95% CIs.

Learner-seat run (one learner seat among NPCs, e.g. `nexus-research-v0`): every seed's final
policy, every NPC heuristic in the learner seat, the scripted vault hedge (RECIPROCATOR +
`npc.hedge`, the autarky-plus-hoarding baseline) and a history-blind heuristic (BLIND,
train.attribution.history_blind) play the same episode keys. Per policy: return (mean ± 95% CI),
trades of the learner seat per episode, trade completion (its trades / proposals involving it),
vault use, trust in it (T[j, 0], mean over steps; also per partner seat, with the trades with it),
the raw attribution gap (its trade rate with a partner in the 10 steps after that partner's
force-majeure break minus after a malicious one) and the capacity-controlled gap (train.attribution), each with an episode-bootstrap CI. Per seed:
paired trained - policy return differences.

Self-play run (every seat a learner, e.g. `nexus-research-selfplay-v0`): each saved snapshot of
each seed plays every seat on the same keys; trade completion (all trades / all proposals, per
episode), mean trust over all pairs and seat 0's return, update 0 (the population at
initialisation) against the last snapshot, paired over the keys.

Writes RUN_DIR/research.json (docs/research.md).
"""
from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from nexus_jax.cli import ArgumentParser, entry_point, positive_int
from nexus_jax.envs.nexus import NPC_ARCHETYPES, Archetype, hedge_actions, npc_actions, with_behaviour
from train.attribution import by_policy, controlled_gap, history_blind
from train.checkpoint import load_run, param_shapes
from train.learner_env import LearnerEnv
from train.runtime import enable_compilation_cache
from train.snapshots import load_policies
from train.stats import mean_ci
from train.suite.studies import attribution_rates
from train.sweep import play_episodes

# HEDGE = RECIPROCATOR + the vault hedge; BLIND = the LEARNER heuristic without its history terms
# (train.attribution.history_blind): the check that the controlled attribution gap is ~0 without judgement.
SCRIPTED = [a.name for a in NPC_ARCHETYPES] + ["HEDGE", "BLIND"]


def scripted_act(base: LearnerEnv, params, archetype, hedge):
    """-> (the LearnerEnv in rules `params`, the params it steps with, rollout act function): the learner seats
    played by NPC `archetype` (traced), the vault hedge laid over it when `hedge` (traced)."""
    env = base.with_params(params)
    hp = with_behaviour(params, env.seats, archetype)
    unvault_at = base.max_steps - params.vault_delay - 3  # hedge_headroom.py's default

    def act(k, obs, state, masks):
        def one(kk, s):
            a = npc_actions(kk, s, hp, hp.behaviours)[env.seats]
            return hedge_actions(a, s, hp, env.seats, jnp.full(env.num_learners, hedge), unvault_at)
        return jax.vmap(one)(jax.random.split(k, obs.shape[0]), state), None

    return env, hp, act


def make_scripted(base: LearnerEnv, episodes: int):
    """-> jitted `run(params, archetype, hedge, key)`: `scripted_act`'s policy in rules `params` (traced, so
    one compilation serves any rules of the same shapes). Output: train.sweep.play_episodes' dict."""
    def run(params, archetype, hedge, key):
        env, hp, act = scripted_act(base, params, archetype, hedge)
        return play_episodes(env, act, hp, key, episodes, base.max_steps)

    return jax.jit(run)


def scripted_args(params, name: str) -> tuple:
    """(params, archetype, hedge) of the scripted policy `name` (one of `SCRIPTED`)."""
    if name == "BLIND":
        return history_blind(params, int(Archetype.LEARNER)), jnp.int32(int(Archetype.LEARNER)), jnp.bool_(False)
    arch = int(Archetype.RECIPROCATOR) if name == "HEDGE" else int(Archetype[name])
    return params, jnp.int32(arch), jnp.bool_(name == "HEDGE")


def scripted_policy(run, params, name: str, key) -> dict:
    """One scripted policy (`SCRIPTED` name) through `make_scripted`'s `run`."""
    return jax.device_get(run(*scripted_args(params, name), key))


def make_trained(env: LearnerEnv, policy, episodes: int):
    """-> jitted `run(policy_params, key)`: the policy in every learner seat, the env's own rules."""
    penv = env.with_params(env.env.default_params)

    def run(pp, key):
        def act(k, obs, state, masks):
            return policy.act(pp, obs, masks, k)[0], None
        return play_episodes(penv, act, penv.params, key, episodes, env.max_steps)

    return jax.jit(run)


def describe(r: dict) -> dict:
    """Per-policy numbers from play_episodes' per-episode arrays."""
    r = {k: np.asarray(v, np.float64) for k, v in r.items()}
    att = attribution_rates(r["fm_trades"], r["fm_steps"], r["mal_trades"], r["mal_steps"])
    ctl = controlled_gap(r["attribution_counts"])
    m, h = mean_ci(r["return"])
    tm, th = mean_ci(r["trades"])
    um, uh = mean_ci(r["trust_in_learner"])
    return {"return": m, "return_ci95": h, "trades": tm, "trades_ci95": th,
            "trade_completion": float(r["trades"].sum() / max(r["proposals"].sum(), 1.0)),
            "vault_use": float(r["vault"].mean()), "trust_in_learner": um, "trust_in_learner_ci95": uh,
            "attribution_gap": att["gap"], "attribution_gap_ci95": att["ci_gap"],
            "rate_after_fm": att["rate_fm"], "rate_after_malicious": att["rate_mal"],
            "attribution_windows": [att["fm_pair_steps"], att["mal_pair_steps"]],
            "attribution_gap_controlled": ctl["gap"], "attribution_gap_controlled_ci95": ctl["ci_gap"],
            "controlled_fm_minus_base": ctl["fm_minus_base"], "controlled_mal_minus_base": ctl["mal_minus_base"],
            "controlled_coverage": ctl["coverage"],
            # per partner seat j (seat 0's own entry is 0.5, 0, 0, 0): T[j, 0], trades with seat 0, seat 0's proposals
            # to j and the ones j refused (REJECT), per episode
            **{k: r["by_seat"][:, i].mean(0).tolist()
               for i, k in enumerate(("trust_by_seat", "trades_by_seat", "proposals_to_seat", "refused_by_seat"))}}


def paired(a, b) -> list[float]:
    m, h = mean_ci(np.asarray(a, np.float64) - np.asarray(b, np.float64))
    return [m, h]


def learner_seat_study(env, policy, seeds: list, episodes: int, key) -> dict:
    """Every seed's policy vs every scripted policy on the same keys."""
    scripted = make_scripted(env, episodes)
    params = env.env.default_params
    base = {name: scripted_policy(scripted, params, name, key) for name in SCRIPTED}
    trained = make_trained(env, policy, episodes)
    out = {"scripted": {n: describe(r) for n, r in base.items()}, "seeds": []}
    pooled = []
    for s, pp in enumerate(seeds):
        r = jax.device_get(trained(pp, key))
        pooled.append(r)
        row = describe(r)
        row["minus"] = {n: paired(r["return"], b["return"]) for n, b in base.items()}
        row["trades_minus_hedge"] = paired(r["trades"], base["HEDGE"]["trades"])
        row["trust_minus_hedge"] = paired(r["trust_in_learner"], base["HEDGE"]["trust_in_learner"])
        out["seeds"].append(row)
    pool = {k: np.concatenate([p[k] for p in pooled]) for k in pooled[0] if k != "attribution_counts"}
    pool["attribution_counts"] = by_policy([p["attribution_counts"] for p in pooled])  # each seed its own baseline
    out["trained_pooled"] = describe(pool)
    return out


def selfplay_study(env, policy, snapshots: list, episodes: int, key) -> dict:
    """Every snapshot of every seed in all seats; update 0 vs the last snapshot, paired over the keys."""
    trained = make_trained(env, policy, episodes)
    per = {}
    for seed, update, env_steps, pp in snapshots:
        r = jax.device_get(trained(pp, key))
        completion = np.asarray(r["all_trades"]) / np.maximum(np.asarray(r["all_proposals"]), 1.0)
        per[(seed, update)] = {"env_steps": env_steps, "completion": completion, "trust": np.asarray(r["mean_trust"]),
                               "return": np.asarray(r["return"]), "trades": np.asarray(r["all_trades"])}
    rows = []
    for (seed, update), v in sorted(per.items()):
        rows.append({"seed": seed, "update": update, "env_steps": v["env_steps"],
                     **{k: mean_ci(v[k]) for k in ("completion", "trust", "return", "trades")}})
    change = []
    for seed in sorted({s for s, _ in per}):
        updates = sorted(u for s, u in per if s == seed)
        first, last = per[(seed, updates[0])], per[(seed, updates[-1])]
        change.append({"seed": seed, "from_update": updates[0], "to_update": updates[-1],
                       **{k: paired(last[k], first[k]) for k in ("completion", "trust", "return", "trades")}})
    return {"snapshots": rows, "last_minus_init": change}


def print_learner(res: dict) -> None:
    fmt = ("{:<14} {:8.2f} ± {:.2f}  trades {:5.1f}  completion {:.2f}  vault {:5.1f}  trust {:.3f}  gap {:+.3f} "
           "[{:+.3f}, {:+.3f}]  controlled {:+.3f} [{:+.3f}, {:+.3f}]")

    def line(name, d):
        g, c = d["attribution_gap_ci95"], d["attribution_gap_controlled_ci95"]
        print(fmt.format(name, d["return"], d["return_ci95"], d["trades"], d["trade_completion"], d["vault_use"],
                         d["trust_in_learner"], d["attribution_gap"], g[0], g[1], d["attribution_gap_controlled"],
                         c[0], c[1]))

    def by_seat(d):
        print("    by partner seat 1..N-1: trust in seat 0 " + " ".join(f"{v:.3f}" for v in d["trust_by_seat"][1:])
              + "  trades with it " + " ".join(f"{v:.1f}" for v in d["trades_by_seat"][1:])
              + "  seat 0's proposals to it " + " ".join(f"{v:.1f}" for v in d["proposals_to_seat"][1:])
              + ", refused " + " ".join(f"{v:.1f}" for v in d["refused_by_seat"][1:]))

    for name, d in res["scripted"].items():
        line(name, d)
        by_seat(d)
    for s, d in enumerate(res["seeds"]):
        line(f"trained s{s}", d)
        by_seat(d)
        worst = min(d["minus"].items(), key=lambda kv: kv[1][0] - kv[1][1])
        print("    minus each: " + "  ".join(f"{n} {m:+.2f}±{h:.2f}" for n, (m, h) in d["minus"].items())
              + f"  (weakest margin: {worst[0]})")
    line("trained pool", res["trained_pooled"])


@entry_point("python -m experiments.research.questions")
def main(argv=None):
    ap = ArgumentParser(prog="python -m experiments.research.questions", description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--episodes", type=positive_int, default=1000)
    ap.add_argument("--seed", type=int, default=12345, help="episode keys (the same for every policy)")
    ap.add_argument("--updates-every", type=positive_int, default=None,
                    help="self-play: evaluate only the snapshots at multiples of this many updates, and each seed's "
                         "last (a run that keeps snapshots often, e.g. as past partners)")
    args = ap.parse_args(argv)
    enable_compilation_cache()
    cfg, env, policy, _ = load_run(args.run_dir)  # UserInputError/CheckpointError: one line, exit 2
    policies = load_policies(args.run_dir, param_shapes(cfg, env, policy))
    key = jax.random.PRNGKey(args.seed)
    every = "" if args.updates_every is None else f" --updates-every {args.updates_every}"
    out = {"command": f"python -m experiments.research.questions {args.run_dir} --episodes {args.episodes} --seed {args.seed}"
                      + every, "env_id": cfg.env_id, "episodes": args.episodes}
    if env.num_learners == env.env.default_params.num_agents:
        snapshots = policies["snapshots"]
        if args.updates_every is not None:
            last = {seed: max(u for s, u, *_ in snapshots if s == seed) for seed, *_ in snapshots}
            snapshots = [x for x in snapshots if x[1] % args.updates_every == 0 or x[1] == last[x[0]]]
        out["selfplay"] = res = selfplay_study(env, policy, snapshots, args.episodes, key)
        for r in res["snapshots"]:
            print(f"seed {r['seed']} update {r['update']:4d}: completion {r['completion'][0]:.3f} ± {r['completion'][1]:.3f}"
                  f"  trust {r['trust'][0]:.3f} ± {r['trust'][1]:.3f}  trades {r['trades'][0]:.1f}  return {r['return'][0]:.2f}")
        for c in res["last_minus_init"]:
            print(f"seed {c['seed']} last - init: completion {c['completion'][0]:+.3f} ± {c['completion'][1]:.3f}  "
                  f"trust {c['trust'][0]:+.3f} ± {c['trust'][1]:.3f}")
    else:
        out["learner_seat"] = res = learner_seat_study(env, policy, policies["seeds"], args.episodes, key)
        print_learner(res)
    Path(args.run_dir, "research.json").write_text(json.dumps(out, indent=1, default=float))
    print(f"wrote {Path(args.run_dir, 'research.json')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

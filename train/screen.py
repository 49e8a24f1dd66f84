"""`python -m train.screen`: does an economy pose the write-up's question? Scripted play only, no training.

The write-up states what the Nexus economy is for; SPEC 3 ("The economy's properties") makes it four facts,
measured here with every scripted policy of `npc.scripted` in the learner seat, on the same episode keys, in
one compiled evaluator (the rules are traced, so any rules of the same shapes reuse it):

1. **passive holding costs**: the best cooperative (trading) policy beats the vault hedge and every
   policy that never trades (WAIT, HOARD, AUTARKY), paired over the keys, beyond the 95% CI;
2. **trade pays**: a completed trade raises its parties' utility, the learner seat's (under the best
   cooperative policy) and the NPC seats', on the trade itself (the change of min(E, C) the settled
   amounts make) and from the step before it to `horizon` steps after;
3. **betrayal tempts and costs**: a seat that makes generous promises and breaks them all (BREAKER) is
   ahead of the one that keeps them (PROMISER) over the first `signal_window + 1` steps, and behind over
   the episode (paired returns);
4. **relationships help through shocks**: of the seats a shock hits, those that traded in the
   `horizon` steps before it regain a larger share of the utility it took within `horizon` steps after
   than those that did not (per episode, paired; under the best cooperative policy).

`--map FIELD=V1,V2,.. FIELD=V1,V2,..` instead sweeps two rules and draws, per cell, the best cooperative
policy's return minus the best holding one's (the hedge and the policies that never trade): where
cooperation is rational. Writes `<out>.json` (and `<out>.png` for the map).

    python -m train.screen [--env nexus-v2] [--episodes 1000] [--seed 5] [--horizon 10] [field=value ...]
    python -m train.screen --map shock_reach=0.25,0.5,1.0 p_grid_failure=0.05,0.1,0.2 [--episodes 256]
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np

from nexus_jax import DEFAULT_ENV, rollout
from nexus_jax.cli import ArgumentParser, UserInputError, entry_point, params_error, positive_int
from nexus_jax.envs.nexus import BASELINES, SCRIPTED, Overlay, scripted_actions, scripted_index, scripted_params
from train.learner_env import LearnerEnv
from train.runtime import enable_compilation_cache
from train.stats import mean_ci
from train.sweep import parse_axis

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TRADERS = [b.name for b in BASELINES if b.trades and b.overlay == Overlay.PLAIN]  # cooperative: trade, hold nothing back
HOLDERS = [b.name for b in BASELINES if b.name not in TRADERS]  # hoarding: the vault hedge and the non-traders


# ---- the one compiled evaluator ---------------------------------------------------------------
def make_screen(env: LearnerEnv, episodes: int):
    """-> jitted `run(params, index, key) -> dict` of the scripted policy `index` (npc.scripted.SCRIPTED order)
    in the learner seat under the rules `params` (traced): per episode its `return`; per step (T, E, ...)
    seat 0's `reward`, its `trust_in` (mean T[j, 0]) and `vault`, and per seat the utility `u` after the
    step, the `shock_loss` it took, its `trades`, and the summed immediate utility change of the trades it
    settled (`gain`, `gains` counted)."""
    steps = env.max_steps

    def run(params, index, key):
        sp = scripted_params(params, env.seats, index)
        penv = env.with_params(sp)

        def act(k, obs, state, masks):
            return jax.vmap(lambda kk, s: scripted_actions(index, kk, s, sp, env.seats))(
                jax.random.split(k, obs.shape[0]), state), None

        def trace(s: rollout.Step):
            gain, count = jax.vmap(trade_gains)(s.state, s.info["stats"]["trades"])
            t = s.info["stats"]["trades"].astype(jnp.float32)
            return {"reward": s.reward[:, 0], "u": s.info["utility"], "shock_loss": s.info["flows"]["shock_loss"].sum(-1),
                    "trades": t.sum(2) + t.sum(1), "gain": gain, "gains": count,
                    "trust_in": s.state.trust[:, 1:, 0].mean(-1), "vault": s.state.vault[:, 0].sum(-1)}

        ep = rollout.evaluate(penv, act, key, episodes, steps, sp, trace=trace)
        return {"return": ep.returns[:, 0], **ep.trace}

    return jax.jit(run)


def trade_gains(state, accepted):
    """(N,) summed immediate utility change of the trades each seat settles this step, and (N,) their count.

    `state` is the state the step starts from; `accepted` [proposer, acceptor]. The change is that of
    min(E, C) over liquid holdings (available + escrow) when only the trade's amounts move."""
    p = state.proposals
    liquid = state.available + state.escrow  # (N, 2)
    give = jnp.stack([jnp.where(p.resource == r, p.give, 0.0) for r in (0, 1)], -1)  # (N, N, 2) of the proposer
    want = jnp.stack([jnp.where(p.resource == 1 - r, p.want, 0.0) for r in (0, 1)], -1)
    u = lambda x: jnp.min(x, -1)  # noqa: E731
    d_proposer = u(liquid[:, None, :] - give + want) - u(liquid)[:, None]
    d_acceptor = u(liquid[None, :, :] + give - want) - u(liquid)[None, :]
    acc = accepted.astype(jnp.float32)
    gain = (acc * d_proposer).sum(1) + (acc * d_acceptor).sum(0)
    return gain, acc.sum(1) + acc.sum(0)


# ---- the four properties, from the traces ------------------------------------------------------
def _ci(x) -> dict:
    m, h = mean_ci(x)
    return {"mean": m, "ci95": h, "n": int(np.size(x))}


def _host(r: dict) -> dict:
    """The run's arrays as float64 NumPy (episodes have a fixed length here: `main` refuses random ends)."""
    return {k: np.asarray(v, np.float64) for k, v in r.items()}


def trade_pays(r: dict, horizon: int) -> dict:
    """Immediate utility change per trade (seat 0; NPC seats), per-episode means; and U(t + horizon) - U(t - 1)
    around the steps a seat traded."""
    gain, gains, u = r["gain"], r["gains"], r["u"]  # (T, E, N)
    out = {}
    for who, cols in (("learner", slice(0, 1)), ("npcs", slice(1, None))):
        g, c = gain[:, :, cols].sum((0, 2)), gains[:, :, cols].sum((0, 2))
        out[f"{who}_per_trade"] = _ci(g[c > 0] / c[c > 0])
        t = u.shape[0]
        after = u[horizon + 1:, :, cols] - u[:t - horizon - 1, :, cols]  # U(t + H) - U(t - 1) at trade step t
        traded = gains[1:t - horizon, :, cols] > 0
        per_ep = np.array([after[:, e][traded[:, e]].mean() for e in range(u.shape[1]) if traded[:, e].any()])
        out[f"{who}_over_{horizon}_steps"] = _ci(per_ep)
    return out


def shock_recovery(r: dict, horizon: int, min_loss: float = 1.0) -> dict:
    """Share of a shock's utility loss a hit seat regains within `horizon` steps, for seats that traded in the
    `horizon` steps before the shock ("connected") and those that did not ("isolated"); per episode, paired."""
    u, loss, trades = r["u"], r["shock_loss"], r["trades"]
    t_max, episodes, _ = u.shape
    per = {"connected": [[] for _ in range(episodes)], "isolated": [[] for _ in range(episodes)]}
    for t in range(horizon, t_max - horizon):
        took = u[t - 1] - u[t]  # (E, N)
        hit = (loss[t] > 0) & (took >= min_loss)
        if not hit.any():
            continue
        share = np.clip((u[t + horizon] - u[t]) / np.maximum(took, 1e-9), -2.0, 2.0)
        connected = trades[t - horizon:t].sum(0) > 0
        for e, i in zip(*np.nonzero(hit)):
            per["connected" if connected[e, i] else "isolated"][e].append(share[e, i])
    both = [e for e in range(episodes) if per["connected"][e] and per["isolated"][e]]
    diff = [np.mean(per["connected"][e]) - np.mean(per["isolated"][e]) for e in both]
    pooled = {k: _ci([x for e in range(episodes) for x in v[e]]) for k, v in per.items()}
    return {"connected": pooled["connected"], "isolated": pooled["isolated"], "connected_minus_isolated": _ci(diff)}


def paired(a, b) -> dict:
    return _ci(np.asarray(a, np.float64) - np.asarray(b, np.float64))


def properties(rows: dict, raw: dict, horizon: int, window: int) -> dict:
    """The four properties, each with its numbers and whether it holds beyond the 95% CIs."""
    best = max(TRADERS, key=lambda n: rows[n]["return"]["mean"])
    margins = {n: paired(raw[best]["return"], raw[n]["return"]) for n in HOLDERS}
    k = window + 1
    early = paired(raw["breaker"]["reward"][:k].sum(0), raw["promiser"]["reward"][:k].sum(0))
    whole = paired(raw["breaker"]["return"], raw["promiser"]["return"])
    pays = trade_pays(raw[best], horizon)
    shocks = shock_recovery(raw[best], horizon)
    above = lambda d: d["mean"] - d["ci95"] > 0  # noqa: E731
    return {
        "best_cooperative": best,
        "passive_holding_costs": {"holds": all(above(m) for m in margins.values()),
                                  "best_minus": margins},
        "trade_pays": {"holds": all(above(v) for v in pays.values()), **pays},
        "betrayal_tempts_and_costs": {"holds": above(early) and -whole["mean"] - whole["ci95"] > 0, "steps": k,
                                      "breaker_minus_promiser_first_steps": early,
                                      "breaker_minus_promiser_episode": whole},
        "relationships_help_through_shocks": {"holds": above(shocks["connected_minus_isolated"]), **shocks},
    }


# ---- running it -------------------------------------------------------------------------------
def screen(env: LearnerEnv, params, run, key, names=None) -> tuple[dict, dict]:
    """Every scripted policy (or `names`) in rules `params` on the same keys -> (table rows, raw traces)."""
    rows, raw = {}, {}
    for name in names or [s.name for s in SCRIPTED]:
        r = _host(jax.device_get(run(params, jnp.int32(scripted_index(name)), key)))
        raw[name] = r
        rows[name] = {"return": _ci(r["return"]), "trades": _ci(r["trades"][:, :, 0].sum(0)),
                      "trust_in_learner": _ci(r["trust_in"].mean(0)), "vault": float(r["vault"].mean()),
                      "trades_at_all": next(s.trades for s in SCRIPTED if s.name == name)}
    return rows, raw


def format_screen(rows: dict, props: dict) -> str:
    lines = [f"{'scripted policy in seat 0':<26}{'return':>9}{'± CI':>7}{'trades':>9}{'trust in it':>13}{'vault':>8}",
             "-" * 72]
    for name, r in rows.items():
        lines.append(f"{name:<26}{r['return']['mean']:>9.2f}{r['return']['ci95']:>7.2f}{r['trades']['mean']:>9.1f}"
                     f"{r['trust_in_learner']['mean']:>13.3f}{r['vault']:>8.1f}")
    f = lambda d: f"{d['mean']:+.3f} ± {d['ci95']:.3f}"  # noqa: E731
    p = props
    holds = lambda d: "HOLDS" if d["holds"] else "FAILS"  # noqa: E731
    lines += ["", f"best cooperative policy: {p['best_cooperative']}",
              f"1. passive holding costs: {holds(p['passive_holding_costs'])}  (best cooperative minus "
              + ", ".join(f"{n} {f(d)}" for n, d in p['passive_holding_costs']['best_minus'].items()) + ")"]
    t = p["trade_pays"]
    horizon_keys = [k for k in t if k.endswith("_steps")]
    lines.append(f"2. trade pays: {holds(t)}  (utility change per trade: learner seat {f(t['learner_per_trade'])}, "
                 f"NPC seats {f(t['npcs_per_trade'])}; " + ", ".join(f"{k} {f(t[k])}" for k in horizon_keys) + ")")
    b = p["betrayal_tempts_and_costs"]
    lines.append(f"3. betrayal tempts and costs: {holds(b)}  (breaker minus promiser: first {b['steps']} steps "
                 f"{f(b['breaker_minus_promiser_first_steps'])}, episode {f(b['breaker_minus_promiser_episode'])})")
    s = p["relationships_help_through_shocks"]
    lines.append(f"4. relationships help through shocks: {holds(s)}  (share of a shock's loss regained: connected "
                 f"{f(s['connected'])}, isolated {f(s['isolated'])}, paired per episode {f(s['connected_minus_isolated'])})")
    return "\n".join(lines)


def rule_map(env_id: str, run, key, x: tuple, y: tuple, overrides: dict) -> list[dict]:
    """Per cell of the (y, x) grid: every trader's and holder's return; best cooperative minus best holding."""
    cells = []
    for vy in y[1]:
        for vx in x[1]:
            try:
                params = LearnerEnv.make(env_id, {**overrides, x[0]: vx, y[0]: vy}, "factored").default_params
            except (TypeError, ValueError) as e:
                raise UserInputError(f"cell {x[0]}={vx}, {y[0]}={vy}: {e}") from None
            ret = {n: float(np.mean(jax.device_get(run(params, jnp.int32(scripted_index(n)), key))["return"]))
                   for n in TRADERS + HOLDERS}
            coop, hold = max(TRADERS, key=ret.get), max(HOLDERS, key=ret.get)
            cells.append({x[0]: vx, y[0]: vy, "returns": ret, "best_cooperative": coop, "best_holding": hold,
                          "cooperation_minus_holding": ret[coop] - ret[hold]})
    return cells


def plot_map(cells: list[dict], x: tuple, y: tuple, default: dict, path: Path, title: str) -> None:
    z = np.array([c["cooperation_minus_holding"] for c in cells]).reshape(len(y[1]), len(x[1]))
    fig, ax = plt.subplots(figsize=(max(1.4 * len(x[1]) + 3, 8.0), 1.0 * len(y[1]) + 2))
    lim = float(np.max(np.abs(z))) or 1.0
    im = ax.imshow(z, origin="lower", aspect="auto", cmap="RdBu", vmin=-lim, vmax=lim)
    for (i, j), v in np.ndenumerate(z):
        c = cells[i * len(x[1]) + j]
        ax.text(j, i, f"{v:+.1f}\n{c['best_cooperative']}\nvs {c['best_holding']}", ha="center", va="center",
                fontsize=7, color="w" if abs(v) > 0.5 * lim else "k")
    for i, vy in enumerate(y[1]):
        for j, vx in enumerate(x[1]):
            if np.isclose(vx, default[x[0]]) and np.isclose(vy, default[y[0]]):
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=3, ec="k"))
    ax.set_xticks(range(len(x[1])), [str(v) for v in x[1]])
    ax.set_yticks(range(len(y[1])), [str(v) for v in y[1]])
    ax.set(xlabel=x[0], ylabel=y[0])
    ax.set_title(title, fontsize=9, wrap=True)
    fig.colorbar(im, ax=ax, label="best cooperative - best holding (return)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _field_values(params, names) -> dict:
    return {n: float(np.asarray(getattr(params, n))) for n in names}


@entry_point("python -m train.screen")
def main(argv=None) -> int:
    ap = ArgumentParser(prog="python -m train.screen", description=__doc__.splitlines()[0])
    ap.add_argument("--env", default=DEFAULT_ENV, help=f"a Nexus env id with one learner seat (default {DEFAULT_ENV})")
    ap.add_argument("--episodes", type=positive_int, default=None, help="per policy (default 1000; --map: 256)")
    ap.add_argument("--seed", type=int, default=5, help="episode keys (the same for every policy)")
    ap.add_argument("--horizon", type=positive_int, default=10, help="steps after a trade or a shock")
    ap.add_argument("--map", nargs=2, metavar="FIELD=V1,V2,..", default=None,
                    help="x and y rules of the rule map (traced NexusParams fields)")
    ap.add_argument("--out", default=None, help="output path without suffix (default runs/screen-<env>[-map])")
    ap.add_argument("overrides", nargs="*", help="params FIELD=VALUE applied to the env's rules")
    args = ap.parse_args(argv)
    overrides = {}
    for text in args.overrides:
        field, values = parse_axis(text)
        if len(values) != 1:
            raise UserInputError(f"override {text!r}: one value per field")
        overrides[field] = values[0]
    enable_compilation_cache()
    try:
        env = LearnerEnv.make(args.env, overrides, "factored")
    except (TypeError, ValueError) as e:
        raise params_error(args.env, e) from None
    if not env.env.spec.npc_seats or env.num_learners != 1:
        raise UserInputError(f"--env {args.env}: the screen needs a Nexus env with one learner seat among NPCs")
    if float(env.default_params.early_end_prob) > 0:
        raise UserInputError("early_end_prob: the screen reads whole episodes of max_steps steps; set it to 0")
    episodes = args.episodes or (256 if args.map else 1000)
    out = Path(args.out or f"runs/screen-{args.env}{'-map' if args.map else ''}")  # <out>.json (and <out>.png)
    out.parent.mkdir(parents=True, exist_ok=True)
    run = make_screen(env, episodes)
    key = jax.random.PRNGKey(args.seed)
    command = "python -m train.screen " + " ".join(argv if argv is not None else sys.argv[1:])
    t0 = time.time()
    if args.map:
        x, y = parse_axis(args.map[0]), parse_axis(args.map[1])
        cells = rule_map(args.env, run, key, x, y, overrides)
        default = _field_values(env.default_params, (x[0], y[0]))
        plot_map(cells, x, y, default, out.with_suffix(".png"),
                 f"{args.env}: best cooperative minus best holding policy,\n{episodes} episodes per policy "
                 f"(box: {args.env}'s rules)")
        out.with_suffix(".json").write_text(json.dumps({"command": command, "env_id": args.env, "episodes": episodes,
                                                       "default": default, "cells": cells}, indent=1))
        for c in cells:
            print(f"{y[0]}={c[y[0]]:<6} {x[0]}={c[x[0]]:<6} {c['cooperation_minus_holding']:+7.2f}  "
                  f"({c['best_cooperative']} vs {c['best_holding']})")
        print(f"wrote {out.with_suffix('.png')}, {out.with_suffix('.json')} ({time.time() - t0:.0f} s)")
        return 0
    rows, raw = screen(env, env.default_params, run, key)
    props = properties(rows, raw, args.horizon, int(env.default_params.signal_window))
    print(f"{args.env}: {episodes} episodes per scripted policy in seat 0, same keys (seed {args.seed}); "
          f"return mean ± 95% CI")
    print(format_screen(rows, props))
    out.with_suffix(".json").write_text(json.dumps({"command": command, "env_id": args.env, "episodes": episodes,
                                                   "seed": args.seed, "policies": rows, "properties": props},
                                                  indent=1, default=float))
    print(f"wrote {out.with_suffix('.json')} ({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

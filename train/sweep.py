"""`python -m train.sweep`: PPO trained over a grid of env rules x seeds in ONE compiled program, with heatmaps.

The env params are a pytree whose non-shape fields are traced (SPEC 2), so a grid of rules is
one batched `NexusParams` and `jax.vmap` trains a policy per (rule cell, seed) with a single
compilation (`TRACES` counts the traces; tests/test_sweep.py checks that it stays at one across
grids). Each trained policy is then evaluated in its own cell's rules, next to every scripted
baseline of `npc.scripted` (the NPC archetypes, the vault hedge, WAIT, HOARD, AUTARKY) on the same keys. Per cell,
pooled over seeds and episodes: the learner's return, the best baseline and whether the learner beats every one
beyond the CIs, the hedge's return and what it adds to the plain RECIPROCATOR,
trade completion (trades involving the learner / proposals involving it, made or received),
vault use (units in the learner's vault, mean over steps), mean trust in the learner (T[j, 0],
j != 0, mean over steps) and the attribution gap (seat 0's trade rate with a partner in the 10
steps after its force-majeure break minus after its malicious break; nexus_jax.wrappers.metrics;
episode-bootstrap CI from train.suite.attribution_rates), and the same question with the partner's
capacity controlled (train.attribution: seat 0's proposals after each kind of break relative to its
baseline with the same partner at the same holdings).

    python -m train.sweep [--x FIELD=V1,V2,..] [--y FIELD=V1,..] [--seeds S] [--episodes E] [key=value ...]

key=value are PPO config overrides (train.config, e.g. total_timesteps=256000 env.num_agents=4);
the defaults (configs/sweep.yaml) are sized for a few minutes on a 2-core CPU. Writes
runs/<name>/sweep.json, sweep.png and sweep_episodes.npz (per-episode numbers, (cells, seeds, episodes)).
"""
from __future__ import annotations

import collections
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np

from nexus_jax import rollout, sharding
from nexus_jax.cli import ArgumentParser, UserInputError, entry_point, positive_int
from nexus_jax.distributed import is_main_process
from nexus_jax.envs.nexus import BASELINES, NexusParams, scripted_actions, scripted_index
from train import attribution
from train.config import PPOConfig, load_config
from train.evaluate import scripted_step_params
from train.learner_env import LearnerEnv
from train.memory import policy_act
from train.networks import ActorCritic
from train.ppo import make_mesh, make_train
from train.runtime import enable_compilation_cache
from train.stats import ci_above, mean_ci, summary
from train.loggers import EVALUATION, open_logger
from train.suite.studies import attribution_rates
from train.tracking import DeviceFeed, device_feed, drain, log_history, run_name

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SWEEP_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "sweep.yaml"
DEFAULT_X = ("p_grid_failure", (0.05, 0.25))  # shock rate (GRID_FAILURE starts per step)
DEFAULT_Y = ("vault_delay", (1, 6))  # how illiquid the hedge is
# Axes that would change shapes or the episode length the evaluation scans over.
_NOT_AXES = ("num_agents", "amount_grid", "ledger_size", "obs_ledger_events", "vault_queue_len", "max_steps",
             "archetypes", "behaviours", "behaviour_shuffle")
TRACES: collections.Counter = collections.Counter()  # "cell": times the per-cell program was traced
_NAMED = {"hedge": scripted_index("hedge"), "reciprocator": scripted_index("reciprocator")}  # kept whole per episode


def parse_axis(text: str) -> tuple[str, tuple]:
    """'FIELD=v1,v2' -> (field, values); the field must be a traced scalar NexusParams field."""
    field, sep, raw = text.partition("=")
    names = {f.name for f in dataclasses.fields(NexusParams)}
    if not sep or not raw:
        raise UserInputError(f"axis {text!r}: expected FIELD=V1,V2,...")
    if field not in names:
        raise UserInputError(f"axis {text!r}: unknown NexusParams field {field!r}")
    if field in _NOT_AXES:
        raise UserInputError(f"axis {text!r}: {field} sets shapes or the episode length; it cannot be swept")
    try:
        values = tuple(float(v) if any(c in v for c in ".eE") else int(v) for v in raw.split(","))
    except ValueError as e:
        raise UserInputError(f"axis {text!r}: values must be numbers ({e})") from None
    return field, values


def grid_params(cfg: PPOConfig, x: tuple[str, tuple], y: tuple[str, tuple]) -> tuple[LearnerEnv, Any]:
    """-> (the base LearnerEnv, NexusParams batched over the (len(y) * len(x)) cells, y-major).

    Every cell is validated by `NexusParams.create` through `nexus_jax.make` (a bad value names the cell).
    """
    base = LearnerEnv.make(cfg.env_id, cfg.env, cfg.action_head)
    cells = []
    for vy in y[1]:
        for vx in x[1]:
            try:
                env = LearnerEnv.make(cfg.env_id, {**cfg.env, x[0]: vx, y[0]: vy}, cfg.action_head)
            except (TypeError, ValueError) as e:
                raise UserInputError(f"cell {x[0]}={vx}, {y[0]}={vy}: {e}") from None
            cells.append(env.env.default_params)
    return base, jax.tree.map(lambda *xs: jnp.stack([jnp.asarray(v) for v in xs]), *cells)


def grid_runs(cfg: PPOConfig, x: tuple[str, tuple], y: tuple[str, tuple], seeds: int) -> tuple[np.ndarray, dict]:
    """The sweep's runs for experiment tracking: names (G, S) (cells y-major, as `grid_params`, x seeds) and
    each run's config (the PPO config with the cell's env values and the seed index)."""
    cells = [{y[0]: vy, x[0]: vx} for vy in y[1] for vx in x[1]]
    names = np.array([[run_name(**c, seed=s) for s in range(seeds)] for c in cells], dtype=object)
    configs = {names[g, s]: {**cfg.to_dict(), "env": {**cfg.env, **c}, "seed_index": s}
               for g, c in enumerate(cells) for s in range(seeds)}
    return names, configs


def play_episodes(env, act, step_params, key, episodes: int, steps: int) -> dict:
    """`episodes` episodes of `steps` steps with the rollout act function `act(key, obs, state, masks) ->
    (learner actions, None)`, in the rules `step_params` (traced), through the one evaluator
    (`nexus_jax.rollout.evaluate`) -> dict of (episodes,) arrays: seat 0's return, its trades and the
    proposals involving it, vault units and trust in it (means over steps), per partner seat j its trust in
    seat 0 T[j, 0] (mean over steps), its trades with seat 0, seat 0's proposals to it and those it refused
    (`by_seat`, (episodes, 4, N)), the attribution
    windows, every seat's trades, proposals and mean trust over all pairs (the self-play view), and seat 0's
    proposals per attribution window kind and stratum (train.attribution)."""
    metrics = env.episode_metrics

    def fold(carry, s):
        acc, extra, att, seat = carry
        reliance = bool(step_params.signal_prepay)  # static
        # the windows open before this step
        att = att + jax.vmap(lambda a, st, i: attribution.step_counts(a, st, i, reliance))(acc, s.state, s.info)
        acc = jax.vmap(lambda a, st, i: metrics.update(a, st, i, step_params))(acc, s.state, s.info)
        st = s.info["stats"]
        mine = lambda t: (t[:, 0, :].sum(-1) + t[:, :, 0].sum(-1)).astype(jnp.float32)  # noqa: E731
        # Vault and trust from the state each step starts from (steps 0..T-1), as metrics.trust_sum:
        # the state after the last step is already the auto-reset one.
        trust_in = (s.state.trust[:, 1:, 0]).mean(-1)
        extra = extra + jnp.stack([mine(st["trades"]), mine(st["proposals"]), s.state.vault[:, 0].sum(-1),
                                   trust_in], -1)
        t = st["trades"].astype(jnp.float32)  # bool: added as bools they would OR
        with_0 = t[:, 0, :] + t[:, :, 0]  # (E, N) trades with seat 0, both directions
        to_j = [st[k][:, 0, :].astype(jnp.float32) for k in ("proposals", "rejects")]  # [proposer, target]
        seat = seat + jnp.stack([s.state.trust[:, :, 0], with_0, *to_j], 1)
        return acc, extra, att, seat

    def acc0(state):  # extra: trades of seat 0, proposals involving it, vault units, trust in it
        strata = attribution.num_strata(state.available.shape[1])
        return (jax.vmap(lambda s: metrics.init(s, step_params))(state), jnp.zeros((episodes, 4)),
                jnp.zeros((episodes, 3, strata, 2)), jnp.zeros((episodes, 4, state.trust.shape[-1])))

    acc, extra, att, seat = rollout.evaluate(env, act, key, episodes, steps, step_params, fold=fold, fold0=acc0).extra
    s = jax.vmap(metrics.summary)(acc)
    return {
        "return": s["returns"][:, 0],
        "trades": extra[:, 0], "proposals": extra[:, 1],
        "vault": extra[:, 2] / steps, "trust_in_learner": extra[:, 3] / steps,
        # (episodes, 4, N): [T[j, 0] mean over steps, trades with seat 0, seat 0's proposals to j, those j refused]
        "by_seat": seat.at[:, 0].divide(steps),
        "fm_trades": acc.after_fm_trades[:, 0], "fm_steps": acc.after_fm_steps[:, 0],
        "mal_trades": acc.after_mal_trades[:, 0], "mal_steps": acc.after_mal_steps[:, 0],
        "attribution_counts": att,  # (episodes, 3, strata, 2): train.attribution.controlled_gap's input
        # every seat (self-play): trades made, proposals made, mean trust over all pairs
        "all_trades": acc.accepted.sum(-1), "all_proposals": acc.proposals.sum(-1), "mean_trust": s["mean_trust"],
    }


def make_cell(cfg: PPOConfig, base: LearnerEnv, episodes: int, mesh=None, feed: DeviceFeed | None = None):
    """-> pure `cell(rng, env_params) -> dict of (episodes,) arrays`: train PPO in these rules, then evaluate
    the trained policy and the scripted hedge on the same keys (one scan each, `max_steps` steps).
    `mesh` (a `sweep_mesh`): training's env batch is sharded over its data axis. `feed`: every training
    update's metrics to the experiment logger (train/tracking.py)."""
    steps = base.max_steps

    def cell(rng, env_params):
        TRACES["cell"] += 1  # runs at trace time only
        env = base.with_params(env_params)
        policy = ActorCritic.from_config(cfg, env)
        k_train, k_eval = jax.random.split(rng)
        out = make_train(cfg, env=env, mesh=mesh, feed=feed)(k_train)

        key = jax.random.fold_in(k_eval, 0)  # the same episode keys for every candidate in a cell

        def baseline(index):
            """The scripted baseline `index` (npc.scripted.BASELINES) in the learner seats, in these rules."""
            sp = scripted_step_params(env, index + 2)

            def act(k, obs, state, masks):
                return jax.vmap(lambda kk, s: scripted_actions(index, kk, s, sp, env.seats))(
                    jax.random.split(k, obs.shape[0]), state), None
            return play_episodes(env, act, sp, key, episodes, steps)

        scripted = jax.lax.map(baseline, jnp.arange(len(BASELINES)))  # leaves (B, episodes, ...)
        res = {"trained": play_episodes(env, policy_act(policy, out["params"]), env_params, key, episodes, steps),
               "baselines": {"return": scripted["return"]},
               **{name: jax.tree.map(lambda x: x[i], scripted) for name, i in _NAMED.items()}}
        m = out["metrics"]
        res["curve"] = {"episode_return": m["episode_return"], "episodes": m["episodes"]}
        return res

    return cell


def sweep_mesh(cfg: PPOConfig, cells: int, seeds: int):
    """The mesh `cfg.num_devices` asks for, as a grid of runs: cells, then seeds, spread over the devices, each
    run's env batch over the devices left (`nexus_jax.sharding.grid_mesh`); None on one device."""
    mesh = make_mesh(cfg)
    return None if mesh is None else sharding.grid_mesh({"cells": cells, "seeds": seeds}, mesh.devices.flat)


def make_sweep(cfg: PPOConfig, base: LearnerEnv, episodes: int, mesh=None, feed: DeviceFeed | None = None):
    """-> jitted `sweep(rngs (S,), grid params (G,))` with outputs (G, S, ...): one compilation for the grid.

    `mesh` (a `sweep_mesh`, over every process's devices in a multi-process run): the cells and
    seeds are laid over its cells and seeds axes, each run's env batch over its data axis. `feed`: as `make_cell`."""
    if cfg.action_head != "factored" or not base.env.spec.npc_seats:
        raise UserInputError("train.sweep needs an env with NPC seats (a nexus env) and the factored action head")
    cell = make_cell(cfg, base, episodes, mesh, feed)
    seeds, cells = (None, None) if mesh is None else ("seeds", "cells")
    return jax.jit(jax.vmap(jax.vmap(cell, (0, None), spmd_axis_name=seeds), (None, 0), spmd_axis_name=cells))


def pooled(res: dict, cells: int) -> dict:
    """Host-side per-cell numbers (pooled over seeds x episodes) from (G, S, E) arrays; CIs from train.stats."""
    out = []
    names = [b.name for b in BASELINES]
    for g in range(cells):
        base = {n: np.asarray(res["baselines"]["return"][g][:, i]).reshape(-1) for i, n in enumerate(names)}
        best = max(base, key=lambda n: base[n].mean())
        t = {k: np.asarray(v[g]).reshape(-1) for k, v in res["trained"].items() if k != "attribution_counts"}
        h = np.asarray(res["hedge"]["return"][g]).reshape(-1)
        rec = np.asarray(res["reciprocator"]["return"][g]).reshape(-1) if "reciprocator" in res else h * np.nan
        ret, ret_ci = mean_ci(t["return"])
        hret, hret_ci = mean_ci(h)
        diff, diff_ci = mean_ci(t["return"] - h)  # paired: same keys
        worth, worth_ci = mean_ci(h - rec)  # what the vault hedge adds to the RECIPROCATOR, same keys
        att = attribution_rates(t["fm_trades"], t["fm_steps"], t["mal_trades"], t["mal_steps"])
        ctl = attribution.controlled_gap(attribution.by_policy(res["trained"]["attribution_counts"][g]))  # per seed
        seed_ret = np.asarray(res["trained"]["return"][g]).mean(-1)  # (S,)
        beaten = [n for n, b in base.items() if ci_above(summary(t["return"]), summary(b))]
        out.append({
            "best_baseline": best, "best_baseline_return": float(base[best].mean()),
            "return_minus_best_baseline": mean_ci(t["return"] - base[best])[0],
            "return_minus_best_baseline_ci95": mean_ci(t["return"] - base[best])[1],
            "beats_every_baseline": len(beaten) == len(base),
            "not_beaten": sorted(set(base) - set(beaten)),
            "return": ret, "return_ci95": ret_ci, "hedge_return": hret, "hedge_return_ci95": hret_ci,
            "return_minus_hedge": diff, "return_minus_hedge_ci95": diff_ci,
            "reciprocator_return": mean_ci(rec)[0], "hedge_worth": worth, "hedge_worth_ci95": worth_ci,
            "seed_returns": [round(float(v), 3) for v in seed_ret],
            "trade_completion": float(t["trades"].sum() / max(t["proposals"].sum(), 1.0)),
            "trades_per_episode": float(t["trades"].mean()),
            "vault_use": float(t["vault"].mean()),
            "trust_in_learner": float(t["trust_in_learner"].mean()),
            "attribution_gap": att["gap"], "attribution_gap_ci95": att["ci_gap"],
            "attribution_windows": [att["fm_pair_steps"], att["mal_pair_steps"]],
            "attribution_gap_controlled": ctl["gap"], "attribution_gap_controlled_ci95": ctl["ci_gap"],
        })
    return out


PANELS = (("return", "trained return"), ("return_minus_hedge", "trained - vault hedge"),
          ("hedge_worth", "vault hedge - RECIPROCATOR"), ("trade_completion", "trade completion"),
          ("vault_use", "vault use (units)"), ("trust_in_learner", "trust in the learner"),
          ("attribution_gap", "attribution gap (FM - malicious)"),
          ("attribution_gap_controlled", "attribution gap, capacity-controlled"))
_DIVERGING = ("return_minus_hedge", "hedge_worth", "attribution_gap", "attribution_gap_controlled")


def plot_heatmaps(rows: list[dict], x: tuple, y: tuple, path: Path, title: str) -> None:
    """One heatmap per metric over the (y, x) grid, each cell annotated with its value."""
    fig, axes = plt.subplots(2, 4, figsize=(17, 7.5))
    for ax, (key, label) in zip(axes.ravel(), PANELS):
        if key not in rows[0]:
            ax.axis("off")
            continue
        z = np.array([r[key] for r in rows], float).reshape(len(y[1]), len(x[1]))
        im = ax.imshow(z, origin="lower", aspect="auto", cmap="RdBu_r" if key in _DIVERGING else "viridis")
        if key in _DIVERGING and np.isfinite(z).any():
            lim = np.nanmax(np.abs(z)) or 1.0
            im.set_clim(-lim, lim)
        lo, hi = im.get_clim()
        for (i, j), v in np.ndenumerate(z):
            dark = (v - lo) < 0.5 * (hi - lo) if key not in _DIVERGING \
                else abs(v) > 0.5 * max(abs(lo), abs(hi))  # viridis is dark at the low end; RdBu at both ends
            ax.text(j, i, "n/a" if not np.isfinite(v) else f"{v:.2f}", ha="center", va="center", fontsize=8,
                    color="w" if np.isfinite(v) and dark else "k")
        ax.set_xticks(range(len(x[1])), [str(v) for v in x[1]])
        ax.set_yticks(range(len(y[1])), [str(v) for v in y[1]])
        ax.set(xlabel=x[0], ylabel=y[0], title=label)
        fig.colorbar(im, ax=ax, fraction=0.046)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@entry_point("python -m train.sweep")
def main(argv=None) -> int:
    ap = ArgumentParser(prog="python -m train.sweep", description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=None, help="PPO YAML defaults (default: configs/sweep.yaml)")
    ap.add_argument("--x", default=None, help=f"x axis FIELD=V1,V2,... (default {DEFAULT_X[0]}={','.join(map(str, DEFAULT_X[1]))})")
    ap.add_argument("--y", default=None, help=f"y axis (default {DEFAULT_Y[0]}={','.join(map(str, DEFAULT_Y[1]))})")
    ap.add_argument("--seeds", type=positive_int, default=2, help="training seeds per cell")
    ap.add_argument("--episodes", type=positive_int, default=64, help="evaluation episodes per (cell, seed)")
    ap.add_argument("overrides", nargs="*", help="PPO config key=value overrides (e.g. total_timesteps=256000)")
    args = ap.parse_args(argv)
    x = parse_axis(args.x) if args.x else DEFAULT_X
    y = parse_axis(args.y) if args.y else DEFAULT_Y
    cfg = load_config(args.config or SWEEP_CONFIG, args.overrides)
    enable_compilation_cache()
    base, grid = grid_params(cfg, x, y)
    cells = len(x[1]) * len(y[1])
    mesh = sweep_mesh(cfg, cells, args.seeds)
    run_dir = Path(cfg.run_dir) / cfg.name
    writer = is_main_process()  # over several processes, process 0 writes and prints
    if writer:
        run_dir.mkdir(parents=True, exist_ok=True)
        print(f"sweep {cfg.env_id}: {y[0]} {y[1]} x {x[0]} {x[1]} = {cells} cells x {args.seeds} seeds, "
              f"{cfg.num_updates} updates x {cfg.num_envs} envs x {cfg.num_steps} steps each, one compiled program "
              f"on {jax.devices()[0].platform}" + (f" (mesh {dict(mesh.shape)})" if mesh is not None else ""),
              flush=True)
    runs, run_configs = grid_runs(cfg, x, y, args.seeds)
    logger = open_logger(cfg, run_dir, {**run_configs, EVALUATION: cfg.to_dict()}, writer)
    feed = device_feed(logger, runs, cfg.num_envs * cfg.num_steps)
    t0 = time.time()
    rngs = jax.random.split(jax.random.PRNGKey(cfg.seed), args.seeds)
    res = sharding.tree_to_host(jax.block_until_ready(make_sweep(cfg, base, args.episodes, mesh, feed)(rngs, grid)))
    wall = time.time() - t0
    drain(feed)
    log_history(logger, feed, runs, res["curve"], cfg.num_envs * cfg.num_steps)  # a multi-process run: no feed ran
    if not writer:
        return 0
    rows = pooled(res, cells)
    for (iy, vy), (ix, vx) in ((a, b) for a in enumerate(y[1]) for b in enumerate(x[1])):
        rows[iy * len(x[1]) + ix].update({x[0]: vx, y[0]: vy})
    summary = {"command": "python -m train.sweep " + " ".join(argv if argv is not None else sys.argv[1:]),
               "env_id": cfg.env_id, "env": cfg.env, "x": {x[0]: list(x[1])}, "y": {y[0]: list(y[1])},
               "seeds": args.seeds, "episodes_per_seed": args.episodes,
               "env_steps_per_run": cfg.num_updates * cfg.num_envs * cfg.num_steps, "wall_s": round(wall, 1),
               "traces": TRACES["cell"], "cells": rows}
    np.savez_compressed(run_dir / "sweep_episodes.npz", **{f"{c}.{k}": np.asarray(v) for c in ("trained", "hedge", "reciprocator")
                                                           for k, v in res[c].items()})  # (G, S, E) per candidate
    with open(run_dir / "sweep.json", "w") as f:
        json.dump(summary, f, indent=2)
    plot_heatmaps(rows, x, y, run_dir / "sweep.png",
                  f"{cfg.env_id}: PPO x {args.seeds} seeds per cell, {args.episodes} eval episodes per seed "
                  f"({summary['env_steps_per_run']:,} env steps per run)")
    logger.log_table(EVALUATION, "sweep", [{k: v for k, v in r.items() if isinstance(v, (int, float))} for r in rows])
    for name in ("sweep.png", "sweep.json"):
        logger.log_artifact(EVALUATION, run_dir / name)
    logger.close()
    print(f"{cells * args.seeds} runs trained and evaluated in {wall:.0f} s wall (one compilation; traced "
          f"{TRACES['cell']}x)")
    for r in rows:
        verdict = "beats every scripted policy" if r["beats_every_baseline"] else f"not beyond: {','.join(r['not_beaten'])}"
        print(f"  {y[0]}={r[y[0]]:<6} {x[0]}={r[x[0]]:<6} return {r['return']:7.2f} ± {r['return_ci95']:.2f}  "
              f"best scripted {r['best_baseline']} {r['best_baseline_return']:7.2f} ({verdict})  "
              f"hedge {r['hedge_return']:7.2f}  trade completion {r['trade_completion']:.2f}  vault "
              f"{r['vault_use']:5.1f}  trust in learner {r['trust_in_learner']:.3f}  gap {r['attribution_gap']:+.3f} {r['attribution_gap_ci95']}")
    print(f"run folder: {run_dir}/ (sweep.json, sweep.png, sweep_episodes.npz)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`python -m experiments.research.trace RUN_DIR [--episodes 500]`: what a learner-seat run's policies do with each kind of partner.

Every seed's final policy and the scripted BLIND, RECIPROCATOR and HEDGE (experiments.research.questions's) play the same
episode keys in the run's env. Per step of the episode, averaged over episodes and over the partners of
each kind: seat 0's proposals to the partner, its payments ahead on the partner's signals (`signal_prepay`), its
trades with it, its trust in it (T[0, j]) and the partner's trust in it (T[j, 0]), for partners playing the
CHEATER this episode and for the honest ones
(with `behaviour_shuffle` the CHEATER's seat changes from episode to episode, so this is by the hidden
type, not by seat). Also seat 0's share of steps by chosen action type, and its invalid-action rate.

For a self-play run (every seat a learner): each seed's first and last snapshot in every seat, per step the
trades and proposals of all seats and the mean trust over all pairs, and the action mix of all seat-steps.

Writes RUN_DIR/research_trace.json and RUN_DIR/research_trace.png (docs/research.md).
"""
from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np

from nexus_jax import rollout
from nexus_jax.cli import ArgumentParser, entry_point, positive_int
from nexus_jax.envs.nexus import ActionType, Archetype
from train.checkpoint import load_run, param_shapes
from experiments.research.questions import scripted_act, scripted_args
from train.runtime import enable_compilation_cache
from train.snapshots import load_policies

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TRACES = ("proposals", "paid_ahead", "trades", "trust_out", "trust_in")  # per step, CHEATER and honest partners
SCRIPTED_TRACED = ("BLIND", "RECIPROCATOR", "HEDGE")
_LABELS = {"proposals": "seat 0's proposals to the partner per step",
           "paid_ahead": "seat 0's payments ahead on its signals per step", "trades": "trades with seat 0 per step",
           "trust_out": "seat 0's trust in the partner T[0, j]", "trust_in": "the partner's trust in seat 0 T[j, 0]"}


def trace_step(s: rollout.Step, behaviours) -> tuple[jnp.ndarray, jnp.ndarray]:
    """One step of E envs -> ((2, 5) sums over episodes and partners of [CHEATER, honest] x TRACES,
    (2,) partner counts), and (8 + 1,) counts of seat 0's chosen action types and its invalid actions."""
    st = s.info["stats"]
    beh = jnp.asarray(behaviours)[s.state.behaviour_seat]  # (E, N) the behaviour each seat plays this episode
    partner = jnp.arange(beh.shape[1]) > 0
    cheat = (beh == int(Archetype.CHEATER)) & partner
    honest = ~cheat & partner
    vals = jnp.stack([st["proposals"][:, 0, :], st["relied"][:, :, 0], st["trades"][:, 0, :] | st["trades"][:, :, 0],
                      s.state.trust[:, 0, :], s.state.trust[:, :, 0]], 0).astype(jnp.float32)  # (4, E, N)
    sums = jnp.stack([(vals * m).sum((1, 2)) for m in (cheat, honest)])  # (2, 5)
    counts = jnp.stack([cheat.sum(), honest.sum()]).astype(jnp.float32)
    act = jnp.asarray(s.action)
    kind = act[:, 0, 0] if act.ndim == 3 else act[:, 0]  # structured (E, A, 5): the type; else not decodable here
    types = jax.nn.one_hot(kind, len(ActionType)).sum(0) if act.ndim == 3 else jnp.zeros(len(ActionType))
    inv = jnp.zeros(()) if s.invalid is None else s.invalid[:, 0].sum().astype(jnp.float32)
    return (sums, counts), jnp.concatenate([types, inv[None]])


def make_tracer(env, act, params, episodes: int, steps: int, behaviours):
    """-> jitted `run(key)` -> (per-step sums (T, 2, 5), per-step partner counts (T, 2), action counts (9,))."""
    def run(key):
        def fold(acc, s):
            (sums, counts), types = trace_step(s, behaviours)
            return acc + types, (sums, counts)
        (_, _, acc), (sums, counts) = rollout.run(env, key, episodes, steps, act, fold, jnp.zeros(len(ActionType) + 1),
                                                  params)
        return sums, counts, acc
    return jax.jit(run)


def make_population_tracer(env, act, params, episodes: int, steps: int):
    """Self-play: -> jitted `run(key)` -> (per-step sums (T, 3) of [trades, proposals, mean off-diagonal trust]
    over episodes (trades and proposals: all seats), action-type counts (8,) over every seat and step)."""
    def run(key):
        def fold(acc, s):
            st = s.info["stats"]
            n = s.state.trust.shape[-1]
            off = ~jnp.eye(n, dtype=bool)
            trust = (s.state.trust * off).sum((1, 2)) / (n * (n - 1))
            row = jnp.stack([st["trades"].sum((1, 2)), st["proposals"].sum((1, 2)), trust], -1).astype(jnp.float32)
            act_ = jnp.asarray(s.action)
            return acc + jax.nn.one_hot(act_[..., 0], len(ActionType)).sum((0, 1)), row.sum(0)
        (_, _, acc), rows = rollout.run(env, key, episodes, steps, act, fold, jnp.zeros(len(ActionType)), params)
        return rows, acc
    return jax.jit(run)


def selfplay_trace(cfg, env, policy, snapshots: list, episodes: int, key) -> dict:
    """Each seed's first and last snapshot in every seat: per-step trades, proposals and mean trust, and the
    action mix (shares of all seat-steps)."""
    params = env.env.default_params
    penv = env.with_params(params)
    out = {}
    for seed in sorted({s for s, *_ in snapshots}):
        mine = sorted((u, pp) for s, u, _, pp in snapshots if s == seed)
        for update, pp in (mine[0], mine[-1]):
            def act(k, obs, state, masks, pp=pp):
                return policy.act(pp, obs, masks, k)[0], None
            rows, acc = (np.asarray(x, np.float64) for x in make_population_tracer(penv, act, params, episodes,
                                                                                     env.max_steps)(key))
            rows /= episodes
            total = acc.sum()
            out[f"seed {seed} update {update}"] = {
                "per_step": {"trades": rows[:, 0].round(3).tolist(), "proposals": rows[:, 1].round(3).tolist(),
                             "mean_trust": rows[:, 2].round(3).tolist()},
                "action_type_share": {ActionType(i).name: round(float(v) / total, 4) for i, v in enumerate(acc)}}
    return out


def plot_population(res: dict, path: Path, title: str, bin_steps: int = 5) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.6))
    labels = {"trades": "trades per step (all seats)", "proposals": "proposals per step (all seats)",
              "mean_trust": "mean trust (all pairs)"}
    for ax, (k, label) in zip(axes, labels.items()):
        for i, (name, r) in enumerate(res.items()):
            y = np.asarray(r["per_step"][k], float)
            y = y[: len(y) // bin_steps * bin_steps].reshape(-1, bin_steps).mean(1)
            ax.plot(np.arange(len(y)) * bin_steps + (bin_steps - 1) / 2, y, "--" if name.endswith(" 0") else "-",
                    color=f"C{int(name.split()[1])}", lw=1.2, label=name)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("step")
    axes[0].legend(fontsize=7)
    fig.suptitle(title + "  (dashed: the population at initialisation; solid: after training)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=72)
    plt.close(fig)


def summarise(sums, counts, acc, episodes: int, steps: int) -> dict:
    """Host-side: per-step means for each kind of partner, whole-episode means, and the action mix."""
    sums, counts, acc = (np.asarray(x, np.float64) for x in (sums, counts, acc))
    per_step = sums / np.maximum(counts[..., None], 1.0)  # (T, 2, 4)
    whole = sums.sum(0) / np.maximum(counts.sum(0)[:, None], 1.0)  # (2, 4)
    out = {"per_step": {kind: {t: per_step[:, k, i].round(3).tolist() for i, t in enumerate(TRACES)}
                        for k, kind in enumerate(("cheater", "honest"))},
           "episode_mean": {kind: {t: float(whole[k, i]) for i, t in enumerate(TRACES)}
                            for k, kind in enumerate(("cheater", "honest"))}}
    total = episodes * steps
    if acc[:-1].sum() > 0:
        out["action_type_share"] = {ActionType(i).name: round(float(v) / total, 4) for i, v in enumerate(acc[:-1])}
    out["invalid_rate"] = float(acc[-1]) / total
    return out


def plot(res: dict, path: Path, title: str, bin_steps: int = 5) -> None:
    """One panel per trace (TRACES) over the episode, each curve the mean over `bin_steps`-step bins."""
    fig, axes = plt.subplots(1, len(TRACES), figsize=(21, 3.8))
    for ax, t in zip(axes, TRACES):
        for i, (name, r) in enumerate(res.items()):
            style = "-" if name.startswith("trained") else "--"
            for kind, alpha in (("honest", 1.0), ("cheater", 0.45)):
                y = np.asarray(r["per_step"][kind][t], float)
                y = y[: len(y) // bin_steps * bin_steps].reshape(-1, bin_steps).mean(1)
                x = np.arange(len(y)) * bin_steps + (bin_steps - 1) / 2
                ax.plot(x, y, style, color=f"C{i}", lw=1.2, alpha=alpha,
                        label=f"{name}: {'honest' if kind == 'honest' else 'CHEATER'}")
        ax.set_title(_LABELS[t], fontsize=9)
        ax.set_xlabel("step")
    axes[0].legend(fontsize=6, ncol=2)
    fig.suptitle(title + "  (dark: honest partners, light: the partner playing the CHEATER this episode)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=72)
    plt.close(fig)


@entry_point("python -m experiments.research.trace")
def main(argv=None):
    ap = ArgumentParser(prog="python -m experiments.research.trace", description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--episodes", type=positive_int, default=500)
    ap.add_argument("--seed", type=int, default=12345, help="episode keys (the same for every policy)")
    args = ap.parse_args(argv)
    enable_compilation_cache()
    cfg, env, policy, _ = load_run(args.run_dir)
    policies = load_policies(args.run_dir, param_shapes(cfg, env, policy))
    if env.num_learners == env.env.default_params.num_agents:  # self-play: the population over training
        res = selfplay_trace(cfg, env, policy, policies["snapshots"], args.episodes, jax.random.PRNGKey(args.seed))
        for name, r in res.items():
            mix = ", ".join(f"{k} {v:.2f}" for k, v in r["action_type_share"].items() if v >= 0.01)
            print(f"{name:<18} trades/step {np.mean(r['per_step']['trades']):.3f}  proposals/step "
                  f"{np.mean(r['per_step']['proposals']):.3f}  mean trust {np.mean(r['per_step']['mean_trust']):.3f}"
                  f"  mix: {mix}")
        return write(args, cfg, "populations", res, plot_population)
    params = env.env.default_params
    key, steps = jax.random.PRNGKey(args.seed), env.max_steps
    res = {}
    penv = env.with_params(params)
    for s, pp in enumerate(policies["seeds"]):
        def act(k, obs, state, masks, pp=pp):
            return policy.act(pp, obs, masks, k)[0], None
        out = make_tracer(penv, act, params, args.episodes, steps, params.behaviours)(key)
        res[f"trained s{s}"] = summarise(*out, args.episodes, steps)
    for name in SCRIPTED_TRACED:
        p, arch, hedge = scripted_args(params, name)
        senv, hp, act = scripted_act(env, p, arch, hedge)
        out = make_tracer(senv, act, hp, args.episodes, steps, params.behaviours)(key)
        res[name] = summarise(*out, args.episodes, steps)
    for name, r in res.items():
        e = r["episode_mean"]
        mix = ", ".join(f"{k} {v:.2f}" for k, v in r.get("action_type_share", {}).items() if v >= 0.01)
        print(f"{name:<13} proposals/step to CHEATER {e['cheater']['proposals']:.3f} honest {e['honest']['proposals']:.3f}"
              f"  paid ahead/step {e['cheater']['paid_ahead']:.3f} / {e['honest']['paid_ahead']:.3f}"
              f"  trades/step {e['cheater']['trades']:.3f} / {e['honest']['trades']:.3f}  T[0,j] "
              f"{e['cheater']['trust_out']:.3f} / {e['honest']['trust_out']:.3f}  T[j,0] {e['cheater']['trust_in']:.3f} / "
              f"{e['honest']['trust_in']:.3f}  invalid {r['invalid_rate']:.3f}" + (f"  mix: {mix}" if mix else ""))
    return write(args, cfg, "policies", res, plot)


def write(args, cfg, field: str, res: dict, plotter) -> int:
    """RUN_DIR/research_trace.json (the command, the env and `res` under `field`) and research_trace.png."""
    out = {"command": f"python -m experiments.research.trace {args.run_dir} --episodes {args.episodes} --seed {args.seed}",
           "env_id": cfg.env_id, "episodes": args.episodes, field: res}
    Path(args.run_dir, "research_trace.json").write_text(json.dumps(out, indent=1))
    plotter(res, Path(args.run_dir, "research_trace.png"), f"{cfg.env_id}, {args.episodes} episodes")
    print(f"wrote {Path(args.run_dir, 'research_trace.json')} and research_trace.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

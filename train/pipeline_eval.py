"""The pipeline's evaluation: every stage's policy and the env's scripted baselines on the same keys, the table and
its verdicts.

`make_stage_evaluator` plays a policy in the learner seat(s) through the one evaluator and returns per-episode metrics
of the first learner seat (return, invalid-action rate, trade completion, signals honoured /
broken, trust in the learner); `summarise` turns them into mean ± 95% CI; `verdicts` checks
the pipeline's bars (invalid rate after BC and GRPO, GRPO / PPO against BC, equal env steps
and equal wall time).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from nexus_jax import rollout
from nexus_jax.envs.nexus import scripted_actions
from train.evaluate import scripted_step_params
from train.memory import policy_act
from train.stats import ci_above as beats, mean_ci

METRICS = [  # key, column title, format
    ("return", "avg return", "{:.2f}"),
    ("invalid_rate", "invalid-action rate", "{:.2%}"),
    ("trade_completion", "trade completion", "{:.2%}"),
    ("signals_honoured", "signals honoured / ep", "{:.2f}"),
    ("signals_broken", "signals broken / ep", "{:.2f}"),
    ("trust", "mean trust in learner", "{:.3f}"),
]


def make_stage_evaluator(env, policy, num_episodes: int, num_steps: int | None = None):
    """-> jitted `evaluate(params, key) -> {metric: (E,)}`: the policy (sampling, unmasked under UnmaskedEnv)
    in the learner seat(s), through the one evaluator (`nexus_jax.rollout.evaluate`); per-episode metrics of the
    first learner seat. Same key = same episodes."""
    return jax.jit(lambda params, key: stage_metrics(env, policy_act(policy, params), None, key, num_episodes,
                                                     num_steps or env.max_steps))


def make_scripted_evaluator(env, num_episodes: int, num_steps: int | None = None):
    """-> jitted `evaluate(index, key) -> {metric: (E,)}`: the env's scripted baseline `index` (`train.evaluate.
    baseline_names` order) in the learner seat(s), the same metrics and keys as `make_stage_evaluator`."""
    def evaluate(index, key):
        step_params = scripted_step_params(env, index + 2)  # candidate order: trained, random, then the baselines

        def act(k, obs, state, masks):
            return jax.vmap(lambda kk, st: scripted_actions(index, kk, st, step_params, env.seats))(
                jax.random.split(k, jax.tree.leaves(obs)[0].shape[0]), state), None
        return stage_metrics(env, act, step_params, key, num_episodes, num_steps or env.max_steps)

    return jax.jit(evaluate)


def stage_metrics(env, act, step_params, key, num_episodes: int, num_steps: int) -> dict:
    """Per-episode metrics of the first learner seat with the act function `act` (the stages' and the baselines')."""
    s = env.seat_indices[0]

    def fold(acc, x: rollout.Step):
        """Sums over the episode of seat `s`'s per-step metrics."""
        n = x.state.trust.shape[-1]
        trust_in_me = (x.state.trust[:, :, s].sum(-1) - x.state.trust[:, s, s]) / max(n - 1, 1)
        st = x.info["stats"]
        both = lambda m: m[:, s, :].sum(-1) + m[:, :, s].sum(-1)  # noqa: E731
        upd = {"trades": both(st["trades"]).astype(jnp.float32), "proposals": both(st["proposals"]).astype(jnp.float32),
               "honoured": st["signals_honoured"][:, s, :].sum(-1).astype(jnp.float32),
               "broken": st["signals_broken"][:, s, :].sum(-1).astype(jnp.float32), "trust": trust_in_me}
        return {k: acc[k] + upd[k] for k in acc}

    z = jnp.zeros(num_episodes)
    ep = rollout.evaluate(env, act, key, num_episodes, num_steps, step_params, fold=fold,
                          fold0={k: z for k in ("trades", "proposals", "honoured", "broken", "trust")})
    acc, steps = ep.extra, jnp.maximum(ep.length, 1.0)
    return {"return": ep.returns[:, 0], "invalid_rate": ep.invalid_rate[:, 0],
            "trade_completion": acc["trades"] / jnp.maximum(acc["proposals"], 1.0),
            "signals_honoured": acc["honoured"], "signals_broken": acc["broken"], "trust": acc["trust"] / steps}


def summarise(per_episode: dict) -> dict:
    return {k: dict(zip(("mean", "ci95"), mean_ci(v))) for k, v in per_episode.items()}


def format_markdown(table: dict) -> str:
    head = "| stage | " + " | ".join(t for _, t, _ in METRICS) + " |"
    lines = [head, "|---" * (len(METRICS) + 1) + "|"]
    for stage, row in table.items():
        cells = []
        for k, _, fmt in METRICS:
            m, ci = row[k]["mean"], row[k]["ci95"]
            cells.append(f"{fmt.format(m)} ± {fmt.format(ci).rstrip('%')}{'%' if fmt.endswith('%}') else ''}")
        lines.append(f"| {stage} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def verdicts(table: dict, timing: dict, raw: dict | None = None) -> list[str]:
    out = []
    inv = {k: v["invalid_rate"]["mean"] for k, v in table.items()}
    met = inv["random"] > 0.3 and inv["BC"] < 0.02 and inv["GRPO"] < 0.02
    out.append(f"invalid-action rate: random {inv['random']:.1%} ({'>' if inv['random'] > 0.30 else '<='} 30%), "
               f"BC {inv['BC']:.2%}, GRPO {inv['GRPO']:.2%}, PPO {inv['PPO']:.2%} -> bar (BC and GRPO < 2% from a "
               f"random start > 30%): {'MET' if met else 'NOT met'}")
    r = {k: v["return"] for k, v in table.items()}
    for m in ("GRPO", "PPO"):
        # Same evaluation keys: each per-episode difference to BC is a paired comparison (in self-play, what
        # training did to the population it started from).
        d = {} if raw is None else {k: mean_ci(raw[m][k] - raw["BC"][k]) for k in ("return", "trade_completion", "trust")}
        paired = f"; paired difference on the same episodes {d['return'][0]:+.2f} ± {d['return'][1]:.2f}" if d else ""
        out.append(f"{m} vs BC on return: {r[m]['mean']:.2f} ± {r[m]['ci95']:.2f} vs {r['BC']['mean']:.2f} ± "
                   f"{r['BC']['ci95']:.2f} -> {'beats BC (non-overlapping 95% CIs)' if beats(r[m], r['BC']) else 'does NOT beat BC beyond the CIs'}"
                   f"{paired}")
        if d:
            (dc, cc), (dt, ct) = d["trade_completion"], d["trust"]
            out.append(f"{m} - BC, paired on the same episodes: trade completion {dc:+.2%} ± {cc:.2%}, "
                       f"mean trust in learner {dt:+.3f} ± {ct:.3f}")
    if beats(r["GRPO"], r["PPO"]):
        eq = "GRPO better than PPO (non-overlapping CIs)"
    elif beats(r["PPO"], r["GRPO"]):
        eq = "PPO better than GRPO (non-overlapping CIs)"
    else:
        eq = f"no significant difference (GRPO {r['GRPO']['mean']:.2f} vs PPO {r['PPO']['mean']:.2f}, CIs overlap)"
    out.append(f"equal env steps ({timing['GRPO']['env_steps']:,} GRPO vs {timing['PPO']['env_steps']:,} PPO): {eq}")
    out.append(timing["equal_wall"])
    scripted = {k: v for k, v in r.items() if k.startswith("scripted: ")}
    for m in ("GRPO", "PPO") if scripted else ():
        missed = sorted(k[len("scripted: "):] for k, v in scripted.items() if not beats(r[m], v))
        out.append(f"{m} vs every scripted policy on the same keys: " + ("beats all beyond the 95% CIs" if not missed
                   else f"does NOT beat beyond the CIs: {', '.join(missed)}"))
    return out


def equal_wall_time(curves: dict, timing: dict) -> str:
    """Training-curve returns of GRPO and PPO at the same training wall time (compile excluded)."""
    t_star = min(timing["GRPO"]["train_s"], timing["PPO"]["train_s"])
    vals = {}
    for m in ("GRPO", "PPO"):
        ret = np.asarray(curves[m])
        n = len(ret)
        u = max(1, min(n, int(round(n * t_star / timing[m]["train_s"]))))  # updates done by t_star
        k = max(1, n // 5)
        vals[m] = (float(ret[max(0, u - k):u].mean()), u, n)
    better = "GRPO" if vals["GRPO"][0] > vals["PPO"][0] else "PPO"
    return (f"equal wall time ({t_star:.0f} s of training, compile excluded; training-episode return over the last "
            f"fifth of the updates reached by then): GRPO {vals['GRPO'][0]:.2f} (update {vals['GRPO'][1]}/{vals['GRPO'][2]}),"
            f" PPO {vals['PPO'][0]:.2f} (update {vals['PPO'][1]}/{vals['PPO'][2]}) -> {better} higher "
            f"(single seed; training returns, not the evaluation keys)")

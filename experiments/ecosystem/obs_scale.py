"""`python -m experiments.ecosystem.obs_scale`: how large are nexus-v0's observation features, block by block?

Upstream's IPPO-FF and PureJaxRL PPO feed the raw observation to a tanh MLP with orthogonal init and
no normalisation, so features of O(10-100) would saturate the first layer. This plays seat 0 with
random valid actions (uniform over its mask) and reports, for each block of `observation_layout`,
its size, the mean, the mean and largest per-feature standard deviation and the largest |value| over
every step of every episode; and, for upstream's actor-critic at its initialisation (`experiments.ecosystem.ippo_ff.
ActorCritic`, orthogonal sqrt(2) kernels), the first layers' pre-activations on those observations:
their mean |value| and the share beyond |2| (where tanh's slope is below 0.07). Writes a JSON report (`--out`).
"""
from __future__ import annotations

import sys
from pathlib import Path

import nexus_jax

import jax
import jax.numpy as jnp
import numpy as np

from train.runtime import machine, write_report
from experiments.ecosystem.ippo_ff import ActorCritic
from nexus_jax.cli import ArgumentParser, entry_point, positive_int
from nexus_jax.envs.nexus import observation_layout
from nexus_jax.rollout import make_rollout

OUT = Path(__file__).parent / "results" / "obs_scale.json"


def observations(env, episodes: int, seed: int) -> np.ndarray:
    """(T x E, D) seat 0's observations over `episodes` episodes of random valid play (the library's rollout)."""
    traj = make_rollout(env, episodes, int(env.default_params.max_steps))(jax.random.PRNGKey(seed))
    seen = jax.device_get(traj.obs[:, :, 0])
    return seen.reshape(-1, seen.shape[-1])


def block_stats(obs: np.ndarray, layout: dict) -> dict:
    """Per block: size, mean, mean and max per-feature std, max |x|."""
    out = {}
    for name, cols in layout.items():
        b = obs[:, cols]
        std = b.std(0)
        out[name] = {"size": b.shape[1], "mean": round(float(b.mean()), 4), "std_mean": round(float(std.mean()), 4),
                     "std_max": round(float(std.max()), 4), "abs_max": round(float(np.abs(b).max()), 4)}
    return out


def first_layers(obs: np.ndarray, num_actions: int, seed: int) -> dict:
    """Pre-activations of the actor's and critic's first Dense layers of a freshly initialised ActorCritic."""
    params = ActorCritic(num_actions).init(jax.random.PRNGKey(seed), jnp.asarray(obs[:1]))["params"]
    out = {}
    # flax numbers the outer Dense of dense(act(dense(x))) first, so the first layers are Dense_1 and Dense_4
    for name, layer in (("actor", "Dense_1"), ("critic", "Dense_4")):
        pre = obs @ np.asarray(params[layer]["kernel"]) + np.asarray(params[layer]["bias"])
        out[name] = {"abs_mean": round(float(np.abs(pre).mean()), 4), "share_beyond_2": round(float((np.abs(pre) > 2).mean()), 4)}
    return out


@entry_point("python -m experiments.ecosystem.obs_scale")
def main(argv=None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--env-id", default="nexus-v0")
    ap.add_argument("--action-format", default="compact")
    ap.add_argument("--episodes", type=positive_int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    env = nexus_jax.make(args.env_id, action_format=args.action_format)
    obs = observations(env, args.episodes, args.seed)
    report = {"command": "python -m experiments.ecosystem.obs_scale " + " ".join(argv if argv is not None else sys.argv[1:]),
              "machine": machine(), "env_id": args.env_id, "samples": obs.shape[0], "dim": obs.shape[1],
              "abs_max": float(np.abs(obs).max()), "std_mean": float(obs.std(0).mean()),
              "blocks": block_stats(obs, observation_layout(env.default_params)),
              "first_layer_preactivations": first_layers(obs, env.action_space(env.agents[0]).n, args.seed)}
    print(f"{obs.shape[0]} observations of {obs.shape[1]} features: max |x| {report['abs_max']:.3f}, "
          f"mean per-feature std {report['std_mean']:.3f}; first layers at init: {report['first_layer_preactivations']}")
    for name, b in report["blocks"].items():
        print(f"{name:20s} size {b['size']:4d}  mean {b['mean']:7.3f}  std mean {b['std_mean']:6.3f}  "
              f"std max {b['std_max']:6.3f}  max |x| {b['abs_max']:6.3f}")
    write_report(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

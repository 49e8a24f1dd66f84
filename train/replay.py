"""`python -m train.replay RUN_DIR [--episodes K] [--seat S] [--gif]`: watch a trained policy play (HTML replay).

The run's policy plays its learner seat(s) against the run's evaluation opponents (the env's
NPCs, as in `python -m train.evaluate`); `nexus_jax.viz` records the episodes in one jitted
scan and writes RUN_DIR/replay.html (one self-contained page: time slider, trust graph,
holdings, events, ledger; docs/replays.md) and, with --gif, RUN_DIR/replay.gif of the first
episode. Without a run, `--policy random` (a uniformly random valid choice per head) or
`--policy npc` (an NPC heuristic, `--archetype`, in the learner seat; on crisis-v0 the
earliest-deadline-first scheduler) plays `--env` (default nexus-v0). `--seat S` puts the
policy in seat S instead (nexus envs: the seat keeps its own economy, NPCs play the rest).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import jax

import nexus_jax
from nexus_jax import viz
from nexus_jax.cli import ArgumentParser, UserInputError, entry_point, params_error, positive_int
from train.checkpoint import load_run
from train.entity_env import EntityLearnerEnv
from train.evaluate import heuristic_actions, heuristic_archetypes, heuristic_params
from train.learner_env import LearnerEnv, random_actions
from train.memory import policy_act
from train.runtime import enable_compilation_cache

POLICIES = ("trained", "random", "npc")


def make_act(env: LearnerEnv, policy_name: str, policy=None, params=None, archetype: str = "reciprocator"):
    """-> (act function in `nexus_jax.rollout`'s signature (a `Recurrent` for a policy with a memory), env params to
    step with or None)."""
    if policy_name == "trained":
        entity = isinstance(env, EntityLearnerEnv)
        observe = (lambda obs, state: jax.vmap(env.env.entity_obs)(state)) if entity else None
        return policy_act(policy, params, observe), None
    if policy_name == "random":
        return (lambda key, obs, state, masks: (random_actions(key, masks, env.action_head), None)), None
    archetypes = heuristic_archetypes(env)
    if archetypes:  # nexus: an NPC heuristic in the learner seats, its memory following the episode
        if archetype not in archetypes:
            raise UserInputError(f"--archetype: expected one of {sorted(archetypes)}, got {archetype!r}")
        arch = archetypes[archetype]

        def act(key, obs, state, masks):
            keys = jax.random.split(key, obs.shape[0])
            return jax.vmap(lambda k, s: heuristic_actions(env, k, s, arch))(keys, state), None
        return act, heuristic_params(env, arch)
    spec = env.env.spec  # an env without NPCs: its reference heuristic (crisis-v0: earliest deadline first)
    if spec.reference_heuristic is None:
        raise UserInputError(f"--policy npc: {type(env.env).__name__} declares no heuristic")
    heuristic, env_params = spec.heuristics[spec.reference_heuristic], env.default_params

    def act(key, obs, state, masks):
        keys = jax.random.split(key, obs.shape[0])
        return jax.vmap(lambda k, s: heuristic(k, s, env_params)[env.seats])(keys, state), None
    return act, None


def write_replay(env: LearnerEnv, act, key, out: Path, name: str, episodes: int = 1, env_params=None,
                 gif: bool = False) -> list[Path]:
    """Collect `episodes` episodes of `env` with `act` and write `out` (HTML, titled by `name` and the seats)
    and, with `gif`, its .gif."""
    recorded = viz.collect(env.env, act, key, episodes, params=env_params)
    seats = viz.acting_seats(env.env)
    npcs = env.env.npc_seats if env.env.spec.npc_seats else ()
    title = (f"{name} in seat(s) {', '.join(map(str, seats))}"
             + (f" vs NPCs in seat(s) {', '.join(map(str, npcs))}" if npcs else ""))
    labels = [f"episode {e}: {len(ep)} steps, return of seat {seats[0]} {ep.rewards[:, 0].sum():.1f}"
              for e, ep in enumerate(recorded)]
    written = [viz.write_html(env.env, recorded, out, params=env_params, title=title, labels=labels)]
    if gif:
        written.append(viz.animate(env.env, recorded[0], out.with_suffix(".gif"), params=env_params))
    return written


def in_seat(env: LearnerEnv, env_id: str, env_kwargs: dict, seat: Optional[int]) -> LearnerEnv:
    """`env` with the caller's policy in `seat` (None: the env's own learner seats)."""
    if seat is None:
        return env
    if not env.env.spec.npc_seats:
        raise UserInputError(f"--seat: every seat of {env_id!r} is the policy's already")
    n = env.env.default_params.num_agents
    if not 0 <= seat < n:
        raise UserInputError(f"--seat: expected a seat in 0..{n - 1}, got {seat}")
    try:
        return type(env).make(env_id, {**env_kwargs, "learner_seats": (seat,)}, env.action_head)
    except (ValueError, TypeError) as e:
        raise params_error("--seat", e) from None


@entry_point("python -m train.replay")
def main(argv=None) -> int:
    ap = ArgumentParser(prog="python -m train.replay", description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", nargs="?", default=None, help="a run folder of python -m train (omit with --policy)")
    ap.add_argument("--policy", choices=POLICIES, default=None,
                    help="trained (needs RUN_DIR; the default with one), random, npc")
    ap.add_argument("--env", default="nexus-v0", help="env id without a run (default nexus-v0)")
    ap.add_argument("--archetype", default="reciprocator", help="the NPC heuristic of --policy npc (nexus envs)")
    ap.add_argument("--episodes", type=positive_int, default=1, help="episodes to record (default 1)")
    ap.add_argument("--seat", type=int, default=None, help="the seat the policy plays (default: the learner seats)")
    ap.add_argument("--seed", type=int, default=0, help="episode key seed (default 0)")
    ap.add_argument("--gif", action="store_true", help="also write a GIF of the first episode (imageio: viz extra)")
    ap.add_argument("--out", default=None, help="the HTML file (default RUN_DIR/replay.html, else ./replay.html)")
    args = ap.parse_args(argv)
    policy_name = args.policy or ("trained" if args.run_dir else None)
    if policy_name is None:
        ap.error("give a RUN_DIR, or --policy random|npc to play without a run")
    if policy_name == "trained" and not args.run_dir:
        ap.error("--policy trained needs a RUN_DIR")

    if args.out and not Path(args.out).parent.is_dir():
        raise UserInputError(f"--out: folder {str(Path(args.out).parent)!r} not found")

    enable_compilation_cache()
    policy = params = None
    if args.run_dir:
        cfg, env, policy, params = load_run(args.run_dir)  # UserInputError/CheckpointError: one line, exit 2
        env_id, env_kwargs, head = cfg.env_id, dict(cfg.env), cfg.action_head
        name = f"{cfg.name} ({policy_name})"
    else:
        env_id, env_kwargs = args.env, {}
        try:
            formats = nexus_jax.make(env_id).spec.action_formats  # the env says which heads it offers
            env = LearnerEnv.make(env_id, env_kwargs, "factored" if "factored" in formats else "flat")
        except (ValueError, TypeError) as e:
            raise params_error("--env", e) from None
        name = f"{env_id} ({policy_name})"
    env = in_seat(env, env_id, env_kwargs, args.seat)
    act, env_params = make_act(env, policy_name, policy, params, args.archetype)
    out = Path(args.out) if args.out else (Path(args.run_dir) if args.run_dir else Path(".")) / "replay.html"
    written = write_replay(env, act, jax.random.PRNGKey(args.seed), out, name, args.episodes, env_params, args.gif)
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())

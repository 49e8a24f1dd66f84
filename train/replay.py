"""`python -m train.replay RUN_DIR [--episodes K] [--seat S] [--gif]`: watch a trained policy play (HTML replay).

The run's policy plays its learner seat(s) against the run's evaluation opponents (the env's
NPCs, as in `python -m train.evaluate`); `nexus_jax.viz` records the episodes in one jitted
scan and writes RUN_DIR/replay.html (one self-contained page: time slider, trust graph,
holdings, events, ledger; docs/replays.md) and, with --gif, RUN_DIR/replay.gif of the first
episode. Without a run, `--policy` picks who plays `--env` (default nexus-v2, `nexus_jax.DEFAULT_ENV`): `random` (a uniformly
random valid action of `--action-format`, default the env's own), `npc` (the env's NPC heuristic in
the learner seats, `--archetype`; an env without NPCs: its reference heuristic, crisis-v0's
earliest deadline first), or any heuristic the env names (`env.spec.heuristics`: nexus's archetypes,
crisis-v0's rules). A heuristic acts in the env's own layout (`env.spec.heuristic_format`), so the
env it plays is made in that format whatever `--action-format` says; its episode is the same in
every format. `--seat S` puts the policy in seat S instead (nexus envs: the seat keeps its own
economy, NPCs play the rest).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import jax

import nexus_jax
from nexus_jax.envs.nexus import scripted_actions
from nexus_jax import viz
from nexus_jax.cli import ArgumentParser, UserInputError, entry_point, params_error, positive_int
from train.checkpoint import load_run
from train.entity_env import EntityLearnerEnv
from train.evaluate import baseline_names, candidate_names, heuristic_archetypes, scripted_step_params
from train.learner_env import LearnerEnv, random_actions
from train.memory import policy_act
from train.runtime import enable_compilation_cache
from nexus_jax.registry import DEFAULT_ENV

POLICIES = ("trained", "random", "npc")  # beside these, any heuristic the env names (`env.spec.heuristics`)


def policy_names(env) -> list[str]:
    """What `--policy` accepts for `env` (a registered env's class): `POLICIES` and its heuristics."""
    return list(POLICIES) + sorted(env.spec.heuristics)


def heuristic_name(env: LearnerEnv, policy_name: str, archetype: str) -> str:
    """The heuristic a non-learning `policy_name` plays. "npc": the `archetype` NPC where the env has NPC seats
    or no reference heuristic (nexus-selfplay-v0: every seat is a learner, its heuristics are the archetypes),
    else its reference heuristic (crisis-v0: "edf"); any other name is one of the env's heuristics."""
    spec = env.env.spec
    if policy_name != "npc":
        if policy_name not in spec.heuristics:
            raise UserInputError(f"--policy: expected one of {policy_names(env.env)} for this env, got {policy_name!r}")
        return policy_name
    names = heuristic_archetypes(env) or (spec.heuristics if spec.reference_heuristic is None else {})
    if names:
        if archetype not in names:
            raise UserInputError(f"--archetype: expected one of {sorted(names)}, got {archetype!r}")
        return archetype
    if spec.reference_heuristic is None:
        raise UserInputError(f"--policy npc: {type(env.env).__name__} declares no heuristic")
    return spec.reference_heuristic


def make_act(env: LearnerEnv, policy_name: str, policy=None, params=None, archetype: str = "reciprocator"):
    """-> (act function in `nexus_jax.rollout`'s signature (a `Recurrent` for a policy with a memory), env params to
    step with or None).

    A heuristic's actions are rows of `env.env.spec.heuristic_format`: `env` must be made in that format
    (`main` does, through `for_policy`)."""
    if policy_name == "trained":
        entity = isinstance(env, EntityLearnerEnv)
        observe = (lambda obs, state: jax.vmap(env.env.entity_obs)(state)) if entity else None
        return policy_act(policy, params, observe), None
    if policy_name == "random":
        return (lambda key, obs, state, masks: (random_actions(key, masks, env.action_head), None)), None
    name = heuristic_name(env, policy_name, archetype)
    if env.env.spec.npc_seats and name in baseline_names(env):
        # with NPC seats, the evaluation's own path: the scripted policy in the learner seats, stepped with the params
        # that make those seats' NPC memory follow it (a CHEATER's signals are broken at its rate), economy kept
        idx = candidate_names(env).index(name)
        step_params = scripted_step_params(env, idx)

        def act(key, obs, state, masks):
            keys = jax.random.split(key, obs.shape[0])
            return jax.vmap(lambda k, s: scripted_actions(idx - 2, k, s, step_params, env.seats))(keys, state), None
        return act, step_params
    heuristic, env_params = env.env.spec.heuristics[name], env.default_params

    def act(key, obs, state, masks):
        keys = jax.random.split(key, obs.shape[0])
        return jax.vmap(lambda k, s: heuristic(k, s, env_params)[env.seats])(keys, state), None
    return act, None


def head_of(action_format: str) -> str:
    """The learner view's action head for an env action format: factored for structured rows, else flat."""
    return "factored" if action_format == "structured" else "flat"


def format_kwargs(env, env_kwargs: dict, action_format: str) -> dict:
    """`env_kwargs` with `action_format` (left out where it is already the env's own, so an env without the
    option is made as before)."""
    kwargs = {k: v for k, v in env_kwargs.items() if k != "action_format"}
    return kwargs if action_format == env.spec.action_formats[0] else {**kwargs, "action_format": action_format}


def for_policy(env: LearnerEnv, env_id: str, env_kwargs: dict, policy_name: str) -> tuple[LearnerEnv, dict]:
    """(`env`, `env_kwargs`) remade in the heuristics' format when `policy_name` is a heuristic and `env` is in
    another format; as given otherwise."""
    fmt = env.env.spec.heuristic_format
    if policy_name in ("trained", "random") or getattr(env.env, "action_format", "flat") == fmt:
        return env, env_kwargs
    kwargs = format_kwargs(env.env, env_kwargs, fmt)
    return LearnerEnv.make(env_id, kwargs, head_of(fmt)), kwargs


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
    ap.add_argument("--policy", default=None,
                    help="trained (needs RUN_DIR; the default with one), random, npc, or a heuristic the env names")
    ap.add_argument("--env", default=DEFAULT_ENV, help=f"env id without a run (default {DEFAULT_ENV})")
    ap.add_argument("--action-format", default=None,
                    help="the env's action format without a run (default its own; env.spec.action_formats)")
    ap.add_argument("--archetype", default="reciprocator", help="the NPC heuristic of --policy npc (nexus envs)")
    ap.add_argument("--episodes", type=positive_int, default=1, help="episodes to record (default 1)")
    ap.add_argument("--seat", type=int, default=None, help="the seat the policy plays (default: the learner seats)")
    ap.add_argument("--seed", type=int, default=0, help="episode key seed (default 0)")
    ap.add_argument("--gif", action="store_true", help="also write a GIF of the first episode (imageio: viz extra)")
    ap.add_argument("--out", default=None, help="the HTML file (default RUN_DIR/replay.html, else ./replay.html)")
    args = ap.parse_args(argv)
    policy_name = args.policy or ("trained" if args.run_dir else None)
    if policy_name is None:
        ap.error("give a RUN_DIR, or --policy random|npc|HEURISTIC to play without a run")
    if policy_name == "trained" and not args.run_dir:
        ap.error("--policy trained needs a RUN_DIR")
    if args.run_dir and args.action_format:
        ap.error("--action-format: a run's policy acts in the run's own format; give it without a RUN_DIR")

    if args.out and not Path(args.out).parent.is_dir():
        raise UserInputError(f"--out: folder {str(Path(args.out).parent)!r} not found")

    enable_compilation_cache()
    policy = params = None
    if args.run_dir:
        cfg, env, policy, params = load_run(args.run_dir)  # UserInputError/CheckpointError: one line, exit 2
        env_id, env_kwargs = cfg.env_id, dict(cfg.env)
        name = f"{cfg.name} ({policy_name})"
        if policy_name not in policy_names(env.env):
            raise UserInputError(f"--policy: expected one of {policy_names(env.env)} for this env, got "
                                 f"{policy_name!r}")
    else:
        env_id = args.env
        try:
            plain = nexus_jax.make(env_id)  # the env says which formats and heuristics it offers
        except (ValueError, TypeError) as e:
            raise params_error("--env", e) from None
        if policy_name not in policy_names(plain):
            raise UserInputError(f"--policy: expected one of {policy_names(plain)} for {env_id!r}, got "
                                 f"{policy_name!r}")
        fmt = args.action_format or plain.spec.action_formats[0]
        if fmt not in plain.spec.action_formats:
            raise UserInputError(f"--action-format: {env_id!r} offers {list(plain.spec.action_formats)}, got {fmt!r}")
        env_kwargs = format_kwargs(plain, {}, fmt)
        try:
            env = LearnerEnv.make(env_id, env_kwargs, head_of(fmt))
        except (ValueError, TypeError) as e:
            raise params_error("--env", e) from None
        name = f"{env_id} ({policy_name})"
    env, env_kwargs = for_policy(env, env_id, env_kwargs, policy_name)
    env = in_seat(env, env_id, env_kwargs, args.seat)
    act, env_params = make_act(env, policy_name, policy, params, args.archetype)
    out = Path(args.out) if args.out else (Path(args.run_dir) if args.run_dir else Path(".")) / "replay.html"
    written = write_replay(env, act, jax.random.PRNGKey(args.seed), out, name, args.episodes, env_params, args.gif)
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())

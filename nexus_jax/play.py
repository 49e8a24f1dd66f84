"""Play one seat of a Nexus or CrisisCompute env through text: a person at the terminal, a script,
or any `policy(prompt) -> reply` callable (the hook an LLM agent plugs into).

    python -m nexus_jax.play                      # you play agent 0 against the env's NPCs
    python -m nexus_jax.play --script moves.txt   # one reply per line
    python -m nexus_jax.play --others random --seed 3 --steps 20   # no NPCs: other seats random
    python -m nexus_jax.play --env crisis-v0      # a crisis-v0 seat in JSON actions; EDF plays the others

The env's text seat (`nexus_jax.protocol.seats.text_seat`) gives the prompt and the parser:
nexus-v0's command syntax (structured (5,) actions) or crisis-v0's JSON actions (flat indices).

Each step the seat's agent gets the seat's prompt (with feedback on its
previous reply: the parser's error, or the action the reply was read as) and answers with
text; the seat's parser turns the text into an action (WAIT on a parse error),
the env's NPCs play their seats inside the step (any other seat the env leaves to the
caller takes `other_policy`'s action), and the env steps. The env's own error
code for an invalid action is in the next prompt too.

Keys (so a run can be replayed against the JAX env directly):
`key = PRNGKey(seed); key, k_reset = split(key); env.reset(k_reset)`, then each step
`key, k_others, k_step = split(key, 3)`, `other_policy(k_others, state, env)` (only when
the env has more than one external seat), `env.step(k_step, state, actions)`.
"""
from __future__ import annotations

import argparse
import dataclasses
import inspect
import sys
from typing import Any, Callable, Iterable, List, Optional

import jax
import numpy as np

import nexus_jax
from nexus_jax.cli import ArgumentParser, UserInputError, entry_point, params_error, positive_int
from nexus_jax.envs.nexus.env import NexusEnv
from nexus_jax.protocol import ParseError
from nexus_jax.protocol.seats import text_seat

__all__ = ["PlayResult", "StopPlay", "play", "wait_others", "random_valid_others", "edf_others", "script_policy",
           "human_policy", "play_keys", "external_seats", "make_env", "main"]

TextPolicy = Callable[[str], str]
OtherPolicy = Callable[[jax.Array, Any, Any], Any]


class StopPlay(Exception):
    """Raise from a policy to end the loop early (EOFError, StopIteration and KeyboardInterrupt do too)."""


# ---- other external seats --------------------------------------------------------------------
# The env plays its NPC seats itself, inside the step. An env may leave more than one seat to
# the caller (`env.agents`, e.g. `learner_seats=(0, 2)` or "nexus-selfplay-v0"); an
# `other_policy(key, state, env)` gives the actions of all of `env.agents` ((L, 5) structured
# or (L,) flat), and the played seat's row is replaced by the parsed reply.
def external_seats(env) -> tuple:
    """The seats the caller drives, in `env.agents` order."""
    seats = getattr(env, "learner_seats", None)
    if seats is None:
        seats = tuple(int(a.rsplit("_", 1)[-1]) for a in env.agents)
    return tuple(int(i) for i in seats)


def make_env(seat: int = 0, npcs: bool = True, env_id: str = "nexus-v0", **overrides: Any):
    """`nexus-v0` with `seat` external: against the env's NPCs (`npcs=True`), or with every seat
    external (`npcs=False`; the other seats then take `other_policy`'s actions). Parsed text is a
    structured action, so the env takes (5,) rows (`action_format="structured"`) and reports every
    seat's info (`info_mode="full"`). A crisis-v0 id (`env_id="crisis-v0..."`) has no NPCs: every
    seat is external whatever `npcs` says, and the env reports every metric (`info_mode="full"`)."""
    if env_id.startswith("crisis-v0"):
        return nexus_jax.make(env_id, **{"info_mode": "full", **overrides})

    if "learner_seats" in inspect.signature(NexusEnv.create).parameters:  # NPC seats exist
        overrides["learner_seats"] = (int(seat),) if npcs else None
    return nexus_jax.make("nexus-v0", **{"action_format": "structured", "info_mode": "full", **overrides})


def wait_others(key, state, env) -> np.ndarray:
    """Every external seat WAITs (flat index 0 in both envs: (L, 5) zeros for nexus, (L, 1) for crisis)."""
    return np.zeros((len(env.agents), text_seat(env).width), np.int32)


def random_valid_others(key, state, env) -> np.ndarray:
    """Every external seat takes a uniformly random action its mask allows (deterministic in `key`)."""
    return text_seat(env).random_rows(key, state)


def edf_others(key, state, env) -> np.ndarray:
    """crisis-v0 only: every seat plays earliest deadline first (the reference heuristic)."""
    seat = text_seat(env)
    if seat.family != "crisis":
        raise ValueError("edf_others: the EDF heuristic is a crisis-v0 policy")
    return seat.edf_rows(key, state)


OTHER_POLICIES = {"random": random_valid_others, "wait": wait_others, "edf": edf_others}


# ---- text policies ----------------------------------------------------------------------------
def script_policy(lines: Iterable[str]) -> TextPolicy:
    """Replies from a sequence, one per step; the loop stops when it runs out."""
    it = iter(lines)

    def policy(prompt: str) -> str:
        try:
            return next(it)
        except StopIteration:
            raise StopPlay("script exhausted") from None

    return policy


def read_script(path: str) -> List[str]:
    """A script file: one reply per line; blank lines and lines starting with '#' are skipped."""
    try:
        with open(path, encoding="utf-8") as f:
            return [ln.rstrip("\n") for ln in f if ln.strip() and not ln.lstrip().startswith("#")]
    except FileNotFoundError:
        raise UserInputError(f"--script {path!r}: not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UserInputError(f"--script {path!r}: cannot be read as UTF-8 text ({type(e).__name__})") from None


def human_policy(prompt: str) -> str:
    print(prompt, flush=True)
    return input("your action> ")


# ---- the loop ---------------------------------------------------------------------------------
@dataclasses.dataclass
class PlayResult:
    steps: int  # steps played
    done: bool  # the episode ended (env done), not the policy or the step budget
    replies: List[str]  # the seat's raw replies
    parse_errors: List[ParseError]  # per step
    seats: tuple  # the external seats (env.agents order); NPC seats are played inside the env
    actions: np.ndarray  # (T, L, W) int32 actions of the external seats: W=5 structured (nexus), W=1 flat (crisis)
    rewards: np.ndarray  # (T, L) float32 rewards of the external seats
    env_errors: np.ndarray  # (T, N) int32 env error code of every seat's action (NPCs included)
    utility: np.ndarray  # (T, N) float32 every seat's utility after each step (crisis: task completion rate)
    prompts: List[str]  # the prompt of each step (before the reply)
    states: Optional[list] = None  # pre-step states, when record_states=True
    final_state: Any = None  # the state after the last step (a fresh episode's if done: auto-reset)

    seat: int = 0  # the seat the text policy played

    @property
    def seat_return(self) -> float:
        """The played seat's return."""
        return float(self.rewards[:, self.seats.index(self.seat)].sum()) if self.steps else 0.0

    @property
    def total_reward(self) -> np.ndarray:
        return self.rewards.sum(0) if len(self.rewards) else np.zeros(0, np.float32)

    @property
    def parse_error_rate(self) -> float:
        return float(np.mean([e != ParseError.OK for e in self.parse_errors])) if self.parse_errors else 0.0


def play_keys(seed: int, steps: int):
    """(k_reset, [(k_others, k_step) per step]): the key schedule `play` uses."""
    key = jax.random.PRNGKey(seed)
    key, k_reset = jax.random.split(key)
    per_step = []
    for _ in range(steps):
        key, k_others, k_step = jax.random.split(key, 3)
        per_step.append((k_others, k_step))
    return k_reset, per_step


def _feedback(res, fallback: str = "WAIT") -> str:
    if res.ok:
        return f"read as {res.message}"
    return f"could not be read ({res.error.name}: {res.message}); it counted as {fallback}"


def play(
    policy: TextPolicy,
    *,
    env: Any = None,
    seat: int = 0,
    seed: int = 0,
    steps: Optional[int] = None,
    other_policy: OtherPolicy = random_valid_others,
    echo: Optional[Callable[[str], None]] = None,
    include_help: bool = True,
    record_states: bool = False,
    **overrides: Any,
) -> PlayResult:
    """Run one episode (or `steps` steps) with `policy` playing seat `seat` through text.

    `env`: a NexusEnv (default `nexus_jax.make("nexus-v0", learner_seats=(seat,), **overrides)`:
    `seat` against the env's NPCs) or a CrisisEnv (`make_env(env_id="crisis-v0")`: every seat
    external, the others take `other_policy`'s actions); `seat` must be one of the env's external seats
    (`env.agents`). `steps`: at most this many (default `max_steps`); the loop also ends when
    the episode is done or the policy raises StopPlay/EOFError/StopIteration/KeyboardInterrupt.
    `other_policy(key, state, env)` gives the actions of every external seat ((L, 5)
    structured or (L,) flat for nexus, (L,) or (L, 1) flat for crisis, `env.agents` order); the played seat's row is replaced by the
    parsed reply. It is only called when the env leaves other seats to the caller.
    `echo`, when given, receives each reply and its reading (the CLI prints them).
    """
    if env is None:
        env = make_env(seat, npcs=True, **overrides)
    params = env.default_params
    text = text_seat(env)
    if text.family == "nexus" and getattr(env, "action_format", "structured") != "structured":
        raise ValueError("play: parsed text is a structured action; make the env with action_format='structured' "
                         f"(got {env.action_format!r})")
    n = params.num_agents
    seats = external_seats(env)
    if seat not in seats:
        raise ValueError(f"seat {seat} is not driven by the caller in this env (external seats: {seats})")
    row = seats.index(seat)
    if steps is None:
        steps = int(np.asarray(params.max_steps))

    k_reset, keys = play_keys(seed, steps)
    _, state = env.reset(k_reset)
    feedback: Optional[str] = None
    replies, errors, prompts, states = [], [], [], []
    acts, rews, env_errs, utils = [], [], [], []
    done = False
    for k_others, k_step in keys:
        prompt = text.render(state, seat, feedback=feedback, include_help=include_help)
        try:
            reply = policy(prompt)
        except (StopPlay, EOFError, StopIteration, KeyboardInterrupt):
            break
        res = text.parse(reply, state, seat)
        feedback = _feedback(res, text.fallback)
        if echo is not None:
            echo(f"[step {int(state.step)}] agent {seat}: {reply!r} -> {feedback}")
        if len(seats) > 1:
            actions = text.rows(other_policy(k_others, state, env)).reshape(len(seats), text.width).copy()
        else:
            actions = np.zeros((1, text.width), np.int32)
        actions[row] = res.action
        if record_states:
            states.append(state)
        _, state, reward, dones, info = env.step(k_step, state, {a: actions[i] for i, a in enumerate(env.agents)})
        replies.append(reply)
        errors.append(res.error)
        prompts.append(prompt)
        acts.append(actions)
        rews.append(np.asarray([reward[a] for a in env.agents], np.float32))
        env_errs.append(text.env_errors(info, state))
        utils.append(text.utility(info, state))
        if bool(dones["__all__"]):
            done = True
            break
    t, m = len(acts), len(seats)
    return PlayResult(
        steps=t,
        done=done,
        replies=replies,
        parse_errors=errors,
        seats=seats,
        seat=seat,
        actions=np.asarray(acts, np.int32).reshape(t, m, text.width),
        rewards=np.asarray(rews, np.float32).reshape(t, m),
        env_errors=np.asarray(env_errs, np.int32).reshape(t, n),
        utility=np.asarray(utils, np.float32).reshape(t, n),
        prompts=prompts,
        states=states if record_states else None,
        final_state=state,
    )


# ---- CLI ---------------------------------------------------------------------------------------
@entry_point("python -m nexus_jax.play")
def main(argv: Optional[List[str]] = None, env: Any = None) -> int:
    """The CLI. `env`: play in this env instead of making one (tests reuse a compiled env)."""
    ap = ArgumentParser(prog="python -m nexus_jax.play", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0, help="PRNG seed of the episode (default 0)")
    ap.add_argument("--steps", type=positive_int, default=None, help="at most this many steps (default: max_steps)")
    ap.add_argument("--script", metavar="FILE", help="read replies from FILE, one per line, instead of the terminal")
    ap.add_argument("--seat", type=int, default=0, help="which seat you play (default 0)")
    ap.add_argument("--env", default="nexus-v0", help="nexus-v0 (default) or crisis-v0 / crisis-v0-levelN")
    ap.add_argument("--others", choices=["npc"] + sorted(OTHER_POLICIES), default=None,
                    help="who plays the other seats: the env's NPCs (nexus default), or every other seat is "
                         "external and takes random valid actions / WAITs / earliest-deadline-first "
                         "(edf: crisis only, the crisis default)")
    ap.add_argument("--num-agents", type=int, default=None, help="number of seats (default 4)")
    ap.add_argument("--quiet", action="store_true", help="with --script: print only the summary")
    args = ap.parse_args(argv)

    overrides = {} if args.num_agents is None else {"num_agents": args.num_agents}
    crisis = args.env.startswith("crisis-v0")
    others = args.others or ("edf" if crisis else "npc")
    if crisis and others == "npc":
        ap.error("--others npc: crisis-v0 has no NPCs; use edf, random or wait")
    if not crisis and others == "edf":
        ap.error("--others edf: the EDF heuristic plays crisis-v0 seats only")
    # with NPCs, other_policy only matters for seats the env leaves to the caller
    other_policy = random_valid_others if others == "npc" else OTHER_POLICIES[others]
    if args.script:
        lines = read_script(args.script)
        inner = script_policy(lines)

        def policy(prompt: str) -> str:
            if not args.quiet:
                print(prompt, flush=True)
            reply = inner(prompt)
            if not args.quiet:
                print(f"your action> {reply}", flush=True)
            return reply
    else:
        policy = human_policy
    echo = None if args.quiet else (lambda line: print(line, flush=True))
    if env is None:
        try:
            env = make_env(args.seat, npcs=others == "npc", env_id=args.env, **overrides)
        except (ValueError, TypeError, KeyError) as e:  # the registry / params / env name the bad id, field or seat
            raise params_error("--env/--num-agents/--seat", e) from None
    seats = [int(a.rsplit("_", 1)[-1]) for a in env.agents]
    if args.seat not in seats:
        ap.error(f"--seat {args.seat}: not an external seat of this env (external seats: {seats})")
    result = play(policy, env=env, seat=args.seat, seed=args.seed, steps=args.steps,
                  other_policy=other_policy, echo=echo)
    print(f"\nplayed {result.steps} step(s){' (episode done)' if result.done else ''}; "
          f"your return {result.seat_return:.2f}; "
          f"parse errors {sum(e != ParseError.OK for e in result.parse_errors)}; "
          f"invalid actions {int((result.env_errors[:, args.seat] != 0).sum()) if result.steps else 0}")
    if result.steps:
        print("final utility per seat: " + ", ".join(f"{u:.1f}" for u in result.utility[-1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

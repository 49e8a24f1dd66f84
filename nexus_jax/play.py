"""Play one seat of a Nexus or CrisisCompute env through text: a person at the terminal, a script,
or any `policy(prompt) -> reply` callable (the hook an LLM agent plugs into).

    python -m nexus_jax.play                      # you play agent 0 against the env's NPCs
    python -m nexus_jax.play --script moves.txt   # one reply per line
    python -m nexus_jax.play --others random --seed 3 --steps 20   # no NPCs: other seats random
    python -m nexus_jax.play --env crisis-v0      # a crisis-v0 seat in JSON actions; EDF plays the others
    python -m nexus_jax.play --env nexus-selfplay-v0 --others cheater   # every other seat a CHEATER heuristic

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
import functools
import sys
from typing import Any, Callable, Iterable, List, Optional

import jax
import numpy as np

import nexus_jax
from nexus_jax.cli import ArgumentParser, UserInputError, entry_point, params_error, positive_int
from nexus_jax.protocol import ParseError
from nexus_jax.protocol.seats import text_seat
from nexus_jax.registry import DEFAULT_ENV

__all__ = ["PlayResult", "StopPlay", "play", "wait_others", "random_valid_others", "heuristic_others", "edf_others",
           "resolve_others", "others_names", "default_others", "script_policy", "human_policy", "play_keys",
           "external_seats", "make_env", "main"]

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
    """The seats the caller drives, in `env.agents` order (`agent_<i>` is seat i)."""
    return tuple(int(a.rsplit("_", 1)[-1]) for a in env.agents)


def make_env(seat: int = 0, npcs: bool = True, env_id: str = DEFAULT_ENV, **overrides: Any):
    """`env_id` made for text play: actions in its text protocol's format (`TextSeat.action_format`: structured
    (5,) rows for Nexus) and every seat's info (`info_mode="full"`). An env with NPC seats (`spec.npc_seats`)
    has `seat` external against its NPCs (`npcs=True`), or every seat external (`npcs=False`; the other seats
    then take `other_policy`'s actions); an env without leaves every seat to the caller whatever `npcs` says."""
    kwargs = {"info_mode": "full", **overrides}
    env = nexus_jax.make(env_id, **kwargs)
    options = {}
    if env.spec.npc_seats:
        options["learner_seats"] = (int(seat),) if npcs else None
    fmt = text_seat(env).action_format
    if env.action_format != fmt and "action_format" not in overrides:
        options["action_format"] = fmt
    return nexus_jax.make(env_id, **{**kwargs, **options}) if options else env


def wait_others(key, state, env) -> np.ndarray:
    """Every external seat WAITs (flat index 0 in both envs: (L, 5) zeros for nexus, (L, 1) for crisis)."""
    return np.zeros((len(env.agents), text_seat(env).width), np.int32)


def random_valid_others(key, state, env) -> np.ndarray:
    """Every external seat takes a uniformly random action its mask allows (deterministic in `key`)."""
    return text_seat(env).random_rows(key, state)


@functools.lru_cache(maxsize=None)
def _jitted(heuristic):
    """One compiled function per heuristic (an NPC policy run op by op takes most of a second a step)."""
    return jax.jit(heuristic)


def heuristic_others(name: str) -> OtherPolicy:
    """Every external seat plays the env's heuristic `name` (`env.spec.heuristics`: crisis-v0's "edf" and its
    variants, Nexus's NPC archetypes "bully", "cheater", ...)."""

    def others(key, state, env) -> np.ndarray:
        actions = _jitted(env.spec.heuristic(name))(key, state, env.default_params)
        return text_seat(env).rows(np.asarray(actions)[list(external_seats(env))])

    return others


edf_others = heuristic_others("edf")  # crisis-v0: every seat earliest deadline first (its reference heuristic)
OTHER_POLICIES = {"random": random_valid_others, "wait": wait_others}  # for any env, beside its heuristics


def others_names(env) -> list:
    """What can play the seats the env leaves to the caller: `OTHER_POLICIES` and the env's heuristics."""
    return sorted(OTHER_POLICIES) + sorted(env.spec.heuristics)


def resolve_others(name: str, env) -> OtherPolicy:
    """The other-seat policy `name`: "random", "wait", or one of the env's heuristics (a ValueError otherwise)."""
    if name in OTHER_POLICIES:
        return OTHER_POLICIES[name]
    if name in env.spec.heuristics:
        return heuristic_others(name)
    raise ValueError(f"others must be one of {others_names(env)} for {env.name}, got {name!r}")


def default_others(env) -> str:
    """Who plays the other seats unless told: the env's NPCs ("npc") if it has NPC seats, else its reference
    heuristic (crisis-v0: "edf"), else "random"."""
    if env.spec.npc_seats:
        return "npc"
    return env.spec.reference_heuristic or "random"


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

    `env`: any env with a text protocol (`env.spec.text_protocol`), made with its text seat's
    `action_format` (`make_env` does both; default `make_env(seat, **overrides)`: nexus-v0 with
    `seat` against the env's NPCs; `make_env(env_id="crisis-v0")`: every seat external, the others
    take `other_policy`'s actions); `seat` must be one of the env's external seats (`env.agents`).
    `steps`: at most this many (default `max_steps`); the loop also ends when the episode is done
    or the policy raises StopPlay/EOFError/StopIteration/KeyboardInterrupt.
    `other_policy(key, state, env)` gives the actions of every external seat ((L, 5) structured or
    (L,) flat for nexus, (L,) or (L, 1) flat for crisis, `env.agents` order); the played seat's row
    is replaced by the parsed reply. It is only called when the env leaves other seats to the caller.
    `echo`, when given, receives each reply and its reading (the CLI prints them).
    """
    if env is None:
        env = make_env(seat, npcs=True, **overrides)
    params = env.default_params
    text = text_seat(env)
    if env.action_format != text.action_format:
        raise ValueError(f"play: parsed text is a {text.action_format} action; make the env with "
                         f"action_format={text.action_format!r} (got {env.action_format!r})")
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
    ap.add_argument("--env", default=DEFAULT_ENV,
                    help="a registered env id with a text protocol: nexus-v2 (default), nexus-v1, nexus-v0 and their variants, crisis-v0 / "
                         "crisis-v0-levelN")
    ap.add_argument("--others", default=None,
                    help="who plays the other seats: npc (the env's NPCs; the default where it has them), or every "
                         "other seat is external and takes random (valid) actions, wait, or one of the env's "
                         "heuristics (crisis-v0: edf, its default, and its variants; nexus: bully, cheater, ...)")
    ap.add_argument("--num-agents", type=int, default=None, help="number of seats (default 4)")
    ap.add_argument("--quiet", action="store_true", help="with --script: print only the summary")
    args = ap.parse_args(argv)

    overrides = {} if args.num_agents is None else {"num_agents": args.num_agents}
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
            env = make_env(args.seat, npcs=args.others in (None, "npc"), env_id=args.env, **overrides)
        except (ValueError, TypeError, KeyError) as e:  # the registry / params / env name the bad id, field or seat
            raise params_error("--env/--num-agents/--seat", e) from None
    others = args.others or default_others(env)
    if others == "npc" and not env.spec.npc_seats:
        ap.error(f"--others npc: {env.name} has no NPCs; use one of {', '.join(others_names(env))}")
    try:  # with NPCs, the other policy only plays the seats the env leaves to the caller
        others_policy = random_valid_others if others == "npc" else resolve_others(others, env)
    except ValueError as e:
        ap.error(f"--others {others}: {e}")
    seats = list(external_seats(env))
    if args.seat not in seats:
        ap.error(f"--seat {args.seat}: not an external seat of this env (external seats: {seats})")
    result = play(policy, env=env, seat=args.seat, seed=args.seed, steps=args.steps,
                  other_policy=others_policy, echo=echo)
    print(f"\nplayed {result.steps} step(s){' (episode done)' if result.done else ''}; "
          f"your return {result.seat_return:.2f}; "
          f"parse errors {sum(e != ParseError.OK for e in result.parse_errors)}; "
          f"invalid actions {int((result.env_errors[:, args.seat] != 0).sum()) if result.steps else 0}")
    if result.steps:
        print("final utility per seat: " + ", ".join(f"{u:.1f}" for u in result.utility[-1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

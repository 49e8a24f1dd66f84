"""Text <-> structured action for LLM and human agents (host side: plain Python/NumPy, never jit).

`parse(text)` reads one action out of free text the way the Protocol: Nexus write-up
describes ("robust regex extraction that greedily extracts digits while ignoring suffixes
and punctuation"); `format_action(action)` writes the canonical syntax back, and
`parse(format_action(a))` returns `a` for every action of the flat enumeration.
The full grammar, the snapping rule and the error codes are in docs/protocol.md.

Canonical syntax (what `format_action` writes)::

    WAIT
    PROPOSE <target> <give><E|C> <want><E|C>     e.g. PROPOSE 2 10E 5C   (give 10 Energy for 5 Compute)
    SIGNAL  <target> <give><E|C> <want><E|C>     e.g. SIGNAL 1 20C 10E   (promise 20 Compute for 10 Energy)
    ACCEPT <target>
    REJECT <target>
    WORK <E|C>                                    spend 5 of it, gain 2 of the other
    VAULT <amount><E|C>                           e.g. VAULT 10E
    UNVAULT <amount><E|C>                         e.g. UNVAULT 5C

Structured actions are int32 `(type, target, amount_1, amount_2, resource)` with the
amounts as indices into the amount grid (see `nexus_jax.envs.nexus.actions`).
"""
from __future__ import annotations

import dataclasses
import math
import re
from enum import IntEnum
from typing import Any, Optional, Sequence

import numpy as np

from nexus_jax.envs.nexus.actions import _offsets, action_table
from nexus_jax.envs.nexus.constants import ActionType, Resource
from nexus_jax.envs.nexus.params import NexusParams

__all__ = [
    "DEFAULT_AMOUNT_GRID",
    "DEFAULT_NUM_AGENTS",
    "ParseError",
    "ParseResult",
    "canonical",
    "format_action",
    "parse",
    "snap_amount",
    "wait_action",
]

# Defaults mirror NexusParams (read from the dataclass so they cannot drift).
def _param_default(name: str):
    return NexusParams.__dataclass_fields__[name].default


DEFAULT_AMOUNT_GRID: tuple = tuple(float(x) for x in _param_default("amount_grid"))
DEFAULT_NUM_AGENTS: int = int(_param_default("num_agents"))

MAX_DIGITS = 15  # longer digit runs are BAD_NUMBER (no one means a 16-digit amount)


class ParseError(IntEnum):
    """Why a text could not be read as an action (OK when it could). On any error the action is WAIT."""

    OK = 0
    EMPTY = 1  # no text (None, "", whitespace only)
    UNKNOWN_COMMAND = 2  # no command keyword found
    MISSING_ARGUMENT = 3  # the command lacks a target or an amount
    BAD_NUMBER = 4  # a number too long to be meant (more than MAX_DIGITS digits)
    TARGET_OUT_OF_RANGE = 5  # target not in 0..num_agents-1
    AMOUNT_OFF_GRID = 6  # only with snap=False: an amount that is not a grid level
    INTERNAL = 7  # a bug in the parser; never expected (the parser still does not raise)


_RES_NAME = {int(Resource.ENERGY): "E", int(Resource.COMPUTE): "C"}
_RES_WORDS = {"e": 0, "en": 0, "energy": 0, "c": 1, "comp": 1, "compute": 1}

_COMMANDS = {t.name.lower(): t for t in ActionType}
# A keyword is a whole word (letters on neither side), optionally with a resource suffix
# joined by '_' or '-': PROPOSE_C, WORK-E, VAULT_ENERGY.
_KEYWORD_RE = re.compile(
    r"(?<![a-z])(" + "|".join(sorted(_COMMANDS, key=len, reverse=True)) + r")"
    r"(?:[_\-](energy|compute|e|c))?(?![a-z])",
    re.IGNORECASE | re.ASCII,
)
# Argument tokens: numbers (greedy ASCII digits, optional decimals) and resource words.
_TOKEN_RE = re.compile(
    r"(?P<num>[0-9]+(?:\.[0-9]+)?)|(?<![a-z])(?P<res>energy|compute|comp|en|e|c)(?![a-z])",
    re.IGNORECASE | re.ASCII,
)
# What may separate a single-letter resource tag (E, C, en) from its number: 10E, 10 E, E:10, offer_E=10.
_TIGHT_GAP_RE = re.compile(r"[\s:=_]*")


def wait_action() -> np.ndarray:
    return np.zeros(5, np.int32)


@dataclasses.dataclass(frozen=True)
class ParseResult:
    """`action`: int32 (5,) structured action (WAIT when `error` is not OK); `message`: for humans/LLMs."""

    action: np.ndarray
    error: ParseError
    message: str

    @property
    def ok(self) -> bool:
        return self.error == ParseError.OK

    def flat(self, num_agents: int = DEFAULT_NUM_AGENTS, num_levels: int = len(DEFAULT_AMOUNT_GRID)) -> int:
        """The action's index in the flat Discrete enumeration."""
        return _flat_index(self.action, num_agents, num_levels, _offsets)

    def __eq__(self, other: Any) -> bool:  # arrays make the dataclass default unusable
        if not isinstance(other, ParseResult):
            return NotImplemented
        return bool(np.array_equal(self.action, other.action)) and self.error == other.error and self.message == other.message

    __hash__ = None  # type: ignore[assignment]


def _flat_index(action, num_agents, num_levels, offsets_fn) -> int:
    off = offsets_fn(num_agents, num_levels)
    kind, j, a, b, r = (int(x) for x in action)
    n, L = num_agents, num_levels
    if kind in (ActionType.PROPOSE, ActionType.SIGNAL):
        within = ((r * n + j) * L + a) * L + b
    elif kind in (ActionType.ACCEPT, ActionType.REJECT):
        within = j
    elif kind == ActionType.WORK:
        within = r
    elif kind in (ActionType.VAULT, ActionType.UNVAULT):
        within = r * L + a
    else:
        within = 0
    return int(off[kind] + within)


# ------------------------------------------------------------------------------------------
# Snapping
# ------------------------------------------------------------------------------------------
def snap_amount(value: float, amount_grid: Sequence[float] = DEFAULT_AMOUNT_GRID) -> int:
    """Grid level nearest to `value`; a tie goes to the lower level; above the top -> top level."""
    best, best_d = 0, math.inf
    for i, g in enumerate(amount_grid):
        d = abs(float(g) - value)
        if d < best_d or (d == best_d and float(g) < float(amount_grid[best])):
            best, best_d = i, d
    return best


# ------------------------------------------------------------------------------------------
# Tokens
# ------------------------------------------------------------------------------------------
@dataclasses.dataclass
class _Num:
    text: str
    start: int
    end: int
    tag: Optional[int] = None  # resource attached to this number, if any


@dataclasses.dataclass
class _Res:
    res: int
    word: str
    start: int
    end: int


def _tokens(region: str) -> list:
    out: list = []
    for m in _TOKEN_RE.finditer(region):
        if m.group("num") is not None:
            out.append(_Num(m.group("num"), m.start(), m.end()))
        else:
            w = m.group("res")
            out.append(_Res(_RES_WORDS[w.lower()], w, m.start(), m.end()))
    return out


def _attach_tags(region: str, toks: list, skip_first_number: bool) -> None:
    """Give each resource word to the number it labels (10E, 10 energy, E:10, energy 10, offer_E=10).

    Glued tags (no gap) bind first. Then, left to right, a tag binds to the untagged number
    just before it, else the untagged number just after it. Single letters (E, C, en, comp)
    bind only across whitespace, ':', '=' or '_'; the words energy/compute bind across any
    text without other numbers or resource words between. The target (first number of
    PROPOSE/SIGNAL) never takes a tag.
    """
    nums = [t for t in toks if isinstance(t, _Num)]
    excluded = {id(nums[0])} if (skip_first_number and nums) else set()

    def can_bind(tag: _Res, num: _Num) -> bool:
        if id(num) in excluded or num.tag is not None:
            return False
        gap = region[num.end:tag.start] if num.end <= tag.start else region[tag.end:num.start]
        if tag.word.lower() in ("energy", "compute"):
            return True
        return _TIGHT_GAP_RE.fullmatch(gap) is not None

    pending = []
    for i, t in enumerate(toks):  # pass 1: glued
        if not isinstance(t, _Res):
            continue
        prev_ = toks[i - 1] if i > 0 and isinstance(toks[i - 1], _Num) else None
        next_ = toks[i + 1] if i + 1 < len(toks) and isinstance(toks[i + 1], _Num) else None
        if prev_ is not None and prev_.end == t.start and can_bind(t, prev_):
            prev_.tag = t.res
        elif next_ is not None and next_.start == t.end and can_bind(t, next_):
            next_.tag = t.res
        else:
            pending.append((i, t))
    for i, t in pending:  # pass 2: spaced
        prev_ = toks[i - 1] if i > 0 and isinstance(toks[i - 1], _Num) else None
        next_ = toks[i + 1] if i + 1 < len(toks) and isinstance(toks[i + 1], _Num) else None
        if prev_ is not None and can_bind(t, prev_):
            prev_.tag = t.res
        elif next_ is not None and can_bind(t, next_):
            next_.tag = t.res


# ------------------------------------------------------------------------------------------
# parse
# ------------------------------------------------------------------------------------------
class _Fail(Exception):
    def __init__(self, error: ParseError, message: str):
        super().__init__(message)
        self.error, self.message = error, message


def _find_keyword(text: str):
    """The command keyword to obey: the first ALL-CAPS one if any, else the first one."""
    matches = list(_KEYWORD_RE.finditer(text))
    if not matches:
        return None, None
    caps = [m for m in matches if m.group(1).isupper()]
    chosen = caps[0] if caps else matches[0]
    following = [m for m in matches if m.start() > chosen.start()]
    return chosen, (following[0].start() if following else len(text))


def _number(tok: _Num, what: str) -> float:
    digits = tok.text.split(".")[0]
    if len(digits) > MAX_DIGITS:
        raise _Fail(ParseError.BAD_NUMBER, f"{what} {tok.text[:20]}... has too many digits")
    return float(tok.text)


def _target(tok: _Num, num_agents: int) -> int:
    v = _number(tok, "target")
    if v != int(v) or not 0 <= v < num_agents:
        raise _Fail(
            ParseError.TARGET_OUT_OF_RANGE,
            f"target {tok.text} is not an agent id; agents are 0..{num_agents - 1}",
        )
    return int(v)


def _amount(tok: _Num, what: str, grid: Sequence[float], snap: bool, notes: list) -> int:
    v = _number(tok, what)
    level = snap_amount(v, grid)
    if float(grid[level]) != v:
        if not snap:
            raise _Fail(
                ParseError.AMOUNT_OFF_GRID,
                f"{what} {tok.text} is not an amount level; levels are {_fmt_grid(grid)}",
            )
        notes.append(f"{what} {tok.text} snapped to {_fmt_num(grid[level])}")
    return level


def _fmt_num(v: float) -> str:
    return np.format_float_positional(float(v), trim="-")


def _fmt_grid(grid: Sequence[float]) -> str:
    return ", ".join(_fmt_num(g) for g in grid)


def _parse(text: str, num_agents: int, grid: Sequence[float], snap: bool) -> tuple[np.ndarray, str]:
    kw, region_end = _find_keyword(text)
    if kw is None:
        raise _Fail(
            ParseError.UNKNOWN_COMMAND,
            "no command found; use one of WAIT, PROPOSE, ACCEPT, REJECT, WORK, VAULT, UNVAULT, SIGNAL",
        )
    kind = _COMMANDS[kw.group(1).lower()]
    kw_res = _RES_WORDS[kw.group(2).lower()] if kw.group(2) else None
    name = kind.name
    needed = {ActionType.WAIT: 0, ActionType.WORK: 0, ActionType.ACCEPT: 1, ActionType.REJECT: 1,
              ActionType.VAULT: 1, ActionType.UNVAULT: 1, ActionType.PROPOSE: 3, ActionType.SIGNAL: 3}[kind]
    # Arguments: the rest of the keyword's line (up to the next keyword); if that lacks the
    # numbers the command needs, everything up to the next keyword.
    tail = text[kw.end():region_end]
    line = tail.split("\n", 1)[0]
    region = line
    if sum(isinstance(t, _Num) for t in _tokens(line)) < needed:
        region = tail
    toks = _tokens(region)
    _attach_tags(region, toks, skip_first_number=kind in (ActionType.PROPOSE, ActionType.SIGNAL))
    nums = [t for t in toks if isinstance(t, _Num)]
    tags = [t.res for t in toks if isinstance(t, _Res)]
    notes: list = []
    action = wait_action()
    action[0] = int(kind)

    if kind == ActionType.WAIT:
        return action, ""
    if kind in (ActionType.ACCEPT, ActionType.REJECT):
        if not nums:
            raise _Fail(ParseError.MISSING_ARGUMENT, f"{name} needs a target: {name} <target>")
        action[1] = _target(nums[0], num_agents)
        return action, ""
    if kind == ActionType.WORK:
        res = kw_res if kw_res is not None else (tags[0] if tags else int(Resource.ENERGY))
        if kw_res is None and not tags:
            notes.append("no resource named, Energy assumed")
        action[4] = res
        return action, "; ".join(notes)
    if kind in (ActionType.VAULT, ActionType.UNVAULT):
        if not nums:
            raise _Fail(ParseError.MISSING_ARGUMENT, f"{name} needs an amount: {name} <amount><E|C>")
        if kw_res is not None:
            res = kw_res
        elif nums[0].tag is not None:
            res = nums[0].tag
        elif tags:
            res = tags[0]
        else:
            res = int(Resource.ENERGY)
            notes.append("no resource named, Energy assumed")
        action[2] = _amount(nums[0], "amount", grid, snap, notes)
        action[4] = res
        return action, "; ".join(notes)
    # PROPOSE / SIGNAL: target give want
    if len(nums) < 3:
        got = ["target", "give", "want"][len(nums):]
        raise _Fail(
            ParseError.MISSING_ARGUMENT,
            f"{name} needs a target and two amounts: {name} <target> <give><E|C> <want><E|C>; missing {', '.join(got)}",
        )
    action[1] = _target(nums[0], num_agents)
    if kw_res is not None:
        res = kw_res
    elif nums[1].tag is not None:
        res = nums[1].tag
    elif nums[2].tag is not None:
        res = 1 - nums[2].tag
    else:
        res = int(Resource.ENERGY)
    action[2] = _amount(nums[1], "give", grid, snap, notes)
    action[3] = _amount(nums[2], "want", grid, snap, notes)
    action[4] = res
    return action, "; ".join(notes)


def _resolve(num_agents, amount_grid, params):
    if params is not None:
        num_agents = params.num_agents if num_agents is None else num_agents
        amount_grid = params.amount_grid if amount_grid is None else amount_grid
    num_agents = DEFAULT_NUM_AGENTS if num_agents is None else int(num_agents)
    amount_grid = DEFAULT_AMOUNT_GRID if amount_grid is None else tuple(float(g) for g in amount_grid)
    return num_agents, amount_grid


def parse(
    text: Any,
    num_agents: Optional[int] = None,
    amount_grid: Optional[Sequence[float]] = None,
    *,
    params: Any = None,
    snap: bool = True,
) -> ParseResult:
    """Read one action from free text. Never raises; on failure the action is WAIT and `error` says why.

    `num_agents`/`amount_grid` default to `params`' (if given), else NexusParams' defaults.
    With `snap=False` an amount that is not exactly a grid level is AMOUNT_OFF_GRID.
    """
    try:
        num_agents, amount_grid = _resolve(num_agents, amount_grid, params)
        if text is None:
            raise _Fail(ParseError.EMPTY, "empty action; write one command, e.g. WAIT")
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("utf-8", errors="replace")
        text = str(text)
        if not text.strip():
            raise _Fail(ParseError.EMPTY, "empty action; write one command, e.g. WAIT")
        action, note = _parse(text, num_agents, amount_grid, snap)
        msg = format_action(action, amount_grid)
        return ParseResult(action, ParseError.OK, f"{msg} ({note})" if note else msg)
    except _Fail as f:
        return ParseResult(wait_action(), f.error, f.message)
    except Exception as e:  # a bug: report it instead of crashing an agent loop  # pragma: no cover
        return ParseResult(wait_action(), ParseError.INTERNAL, f"internal parser error: {type(e).__name__}: {e}")


# ------------------------------------------------------------------------------------------
# format
# ------------------------------------------------------------------------------------------
def canonical(action) -> np.ndarray:
    """The action with the fields its type does not use set to 0 (what parse returns)."""
    a = np.asarray(action, np.int32).reshape(5).copy()
    kind = int(a[0])
    keep = {
        ActionType.WAIT: (),
        ActionType.PROPOSE: (1, 2, 3, 4),
        ActionType.SIGNAL: (1, 2, 3, 4),
        ActionType.ACCEPT: (1,),
        ActionType.REJECT: (1,),
        ActionType.WORK: (4,),
        ActionType.VAULT: (2, 4),
        ActionType.UNVAULT: (2, 4),
    }.get(kind, (1, 2, 3, 4))
    out = np.zeros(5, np.int32)
    out[0] = kind
    for i in keep:
        out[i] = a[i]
    return out


def format_action(
    action,
    amount_grid: Optional[Sequence[float]] = None,
    *,
    num_agents: Optional[int] = None,
    params: Any = None,
) -> str:
    """Canonical text of a structured action (int32 (5,)), or of a flat index when given an int.

    Unused fields are ignored. An out-of-range type, level or resource is written as
    `INVALID(...)`, which parse reads as UNKNOWN_COMMAND.
    """
    num_agents, amount_grid = _resolve(num_agents, amount_grid, params)
    a = np.asarray(action)
    if a.ndim == 0:
        table = action_table(num_agents, len(amount_grid))
        idx = int(a)
        if not 0 <= idx < len(table):
            return f"INVALID(flat index {idx})"
        a = table[idx]
    a = [int(x) for x in np.asarray(a).reshape(-1)[:5]]
    kind, target, a1, a2, res = a
    L = len(amount_grid)
    bad = f"INVALID({', '.join(map(str, a))})"
    if not 0 <= kind < len(ActionType):
        return bad
    kind = ActionType(kind)

    def amt(level: int, r: int) -> Optional[str]:
        if not 0 <= level < L or r not in _RES_NAME:
            return None
        return _fmt_num(amount_grid[level]) + _RES_NAME[r]

    if kind == ActionType.WAIT:
        return "WAIT"
    if kind in (ActionType.ACCEPT, ActionType.REJECT):
        return f"{kind.name} {target}" if target >= 0 else bad
    if kind == ActionType.WORK:
        return f"WORK {_RES_NAME[res]}" if res in _RES_NAME else bad
    if kind in (ActionType.VAULT, ActionType.UNVAULT):
        s = amt(a1, res)
        return f"{kind.name} {s}" if s else bad
    give, want = amt(a1, res), amt(a2, 1 - res if res in _RES_NAME else -1)
    if give is None or want is None or target < 0:
        return bad
    return f"{kind.name} {target} {give} {want}"


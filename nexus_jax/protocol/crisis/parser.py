"""Text -> crisis-v0 action for LLM and human agents: the seed's structured JSON actions (host side, never jit).

The CrisisCompute agents answered with one JSON object per hour; this reads it::

    {"action_type": "request_resource", "task_id": "clean_batch_1", "negotiation": "hold"}
    {"action_type": "release_resource"}
    {"action_type": "wait"}

Prose and code fences around the object are fine (the first `{` that starts a well-formed
JSON object with an action type is read). Fields, case-insensitive:

- `action_type` (or `action`): `request_resource` / `request`, `release_resource` /
  `release`, `wait`.
- `task_id` (or `task`, `slot`): the task's name as the prompt shows it, `task_<k>`,
  `slot_<k>` / `slot <k>`, or the slot number k (an integer). Needed by a request; given
  with wait or release it is ignored, and the message says so.
- `negotiation` (`hold` / `yield`) or `yield` (true / false): the stance when requests
  exceed capacity; HOLD when absent (the message says so). Both given and disagreeing is an
  error.
- `cpu` (or `cpu_cores`, `cores`), `memory` (or `memory_gb`, `ram`, `ram_gb`), `gpu`: the
  seed's claim. Optional: a task runs with its own demand, so a claim that differs from the
  task's demand (when the caller gives the demands) is DEMAND_MISMATCH, never rounded.
- anything else (`reasoning`, ...) is ignored and listed in the message.

`parse` never raises: on any error `error` says why and the action is `INVALID_FLAT` (-1),
an index outside the enumeration, so the env treats unreadable text as an invalid action:
it becomes WAIT, costs `invalid_penalty`, is counted in `info["invalid"]`, and the seat's
next observation carries `Error.OUT_OF_RANGE` (the seed counted parse errors as invalid
actions). `format_action(flat)` writes the canonical JSON and
`parse(format_action(a)).flat == a` for every index of the flat enumeration.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
from enum import IntEnum
from typing import Any, Optional, Sequence

import numpy as np

from nexus_jax.envs.crisis.constants import Base, Nego
from nexus_jax.envs.crisis.negotiation import encode

__all__ = ["CrisisParseError", "CrisisParseResult", "INVALID_FLAT", "MAX_TEXT_CHARS", "format_action", "parse", "slot_names"]

MAX_TEXT_CHARS = 16384  # longer replies are TOO_LONG (no one action needs more)
MAX_OBJECT_STARTS = 64  # at most this many '{' are tried as the start of the action object
INVALID_FLAT = -1  # what an unreadable reply becomes: out of range, so the env counts it invalid


class CrisisParseError(IntEnum):
    """Why a reply could not be read as a crisis-v0 action (OK when it could). On error the action is INVALID_FLAT."""

    OK = 0
    EMPTY = 1  # no text
    TOO_LONG = 2  # more than MAX_TEXT_CHARS characters
    NO_JSON = 3  # no '{' at all
    BAD_JSON = 4  # no well-formed JSON object
    MISSING_ACTION_TYPE = 5  # JSON objects, none with an action_type
    UNKNOWN_ACTION_TYPE = 6  # action_type not request_resource / release_resource / wait
    MISSING_TASK = 7  # a request without task_id
    UNKNOWN_TASK = 8  # task_id names no slot of this seat
    BAD_NEGOTIATION = 9  # negotiation not hold/yield, yield not a boolean, or the two disagree
    BAD_AMOUNT = 10  # cpu/memory/gpu not a finite number >= 0
    DEMAND_MISMATCH = 11  # cpu/memory/gpu differ from the task's demand
    INTERNAL = 12  # a bug in the parser; never expected (the parser still does not raise)


@dataclasses.dataclass(frozen=True)
class CrisisParseResult:
    """`flat`: the flat action index (INVALID_FLAT = -1 when `error` is not OK); `message`: for humans/LLMs."""

    flat: int
    error: CrisisParseError
    message: str

    @property
    def ok(self) -> bool:
        return self.error == CrisisParseError.OK

    @property
    def action(self) -> np.ndarray:
        """The action as the play loop stores it: int32 (1,) flat index."""
        return np.asarray([self.flat], np.int32)


class _Fail(Exception):
    def __init__(self, error: CrisisParseError, message: str):
        super().__init__(message)
        self.error, self.message = error, message


_ACTION_KEYS = ("action_type", "action")
_TASK_KEYS = ("task_id", "task", "slot")
_AMOUNT_KEYS = (("cpu", "cpu_cores", "cores"), ("memory", "memory_gb", "ram", "ram_gb"), ("gpu", "gpus"))
_AMOUNT_NAMES = ("cpu", "memory", "gpu")
_KNOWN = set(_ACTION_KEYS + _TASK_KEYS + ("negotiation", "yield") + sum(_AMOUNT_KEYS, ()))
_ACTION_WORDS = {"request_resource": Base.REQUEST, "request": Base.REQUEST, "release_resource": Base.RELEASE,
                 "release": Base.RELEASE, "wait": Base.WAIT}
_BASE_NAME = {Base.WAIT: "wait", Base.RELEASE: "release_resource", Base.REQUEST: "request_resource"}
_SLOT_RE = re.compile(r"(?:slot|task)[ _\-]?([0-9]{1,6})|([0-9]{1,6})", re.IGNORECASE | re.ASCII)


def slot_names(max_tasks: int, names: Optional[Sequence[str]] = None) -> list:
    """The id each slot is shown as: `names[k]` when given and non-empty, else `task_<k>`."""
    out = []
    for k in range(max_tasks):
        n = names[k] if names is not None and k < len(names) else ""
        out.append(n if n else f"task_{k}")
    return out


def _objects(text: str):
    """Every JSON object starting at one of the first MAX_OBJECT_STARTS '{', in order."""
    dec = json.JSONDecoder()
    start, tried, found_any = text.find("{"), 0, False
    if start < 0:
        raise _Fail(CrisisParseError.NO_JSON, 'no JSON object found; reply with one, e.g. {"action_type": "wait"}')
    while start >= 0 and tried < MAX_OBJECT_STARTS:
        tried += 1
        try:
            obj, _ = dec.raw_decode(text, start)
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict):
            found_any = True
            yield obj
        start = text.find("{", start + 1)
    if not found_any:
        raise _Fail(CrisisParseError.BAD_JSON, "no well-formed JSON object found (check quotes, commas and braces)")


def _get(obj: dict, keys: Sequence[str]):
    """(key used, value) for the first of `keys` present (keys compared case-insensitively), else (None, None)."""
    lower = {str(k).lower(): k for k in obj}
    for k in keys:
        if k in lower:
            return lower[k], obj[lower[k]]
    return None, None


def _slot(value: Any, ids: list) -> int:
    K = len(ids)
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise _Fail(CrisisParseError.UNKNOWN_TASK, f"task_id must be a task name or a slot number 0..{K - 1}, "
                                                   f"got {_short(value)}")
    if isinstance(value, int):
        if 0 <= value < K:
            return value
        raise _Fail(CrisisParseError.UNKNOWN_TASK, f"slot {value} does not exist; slots are 0..{K - 1}")
    v = value.strip().lower()
    for k, name in enumerate(ids):
        if v == name.lower():
            return k
    m = _SLOT_RE.fullmatch(v)
    if m:
        k = int(m.group(1) or m.group(2))
        if 0 <= k < K:
            return k
    raise _Fail(CrisisParseError.UNKNOWN_TASK, f"task_id {_short(value)} is not one of your tasks ({', '.join(ids)})")


def _stance(obj: dict, notes: list) -> int:
    k_n, neg = _get(obj, ("negotiation",))
    k_y, yld = _get(obj, ("yield",))
    stance = None
    if k_n is not None:
        if not isinstance(neg, str) or neg.strip().lower() not in ("hold", "yield"):
            raise _Fail(CrisisParseError.BAD_NEGOTIATION, f"negotiation must be \"hold\" or \"yield\", got {_short(neg)}")
        stance = Nego.YIELD if neg.strip().lower() == "yield" else Nego.HOLD
    if k_y is not None:
        if not isinstance(yld, bool):
            raise _Fail(CrisisParseError.BAD_NEGOTIATION, f"yield must be true or false, got {_short(yld)}")
        y = Nego.YIELD if yld else Nego.HOLD
        if stance is not None and y != stance:
            raise _Fail(CrisisParseError.BAD_NEGOTIATION, "negotiation and yield disagree; give one of them")
        stance = y
    if stance is None:
        notes.append("no negotiation given: hold")
        stance = Nego.HOLD
    return int(stance)


def _amounts(obj: dict, demand: Optional[np.ndarray], name: str) -> None:
    for i, keys in enumerate(_AMOUNT_KEYS):
        key, v = _get(obj, keys)
        if key is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise _Fail(CrisisParseError.BAD_AMOUNT, f"{key} must be a number >= 0, got {_short(v)}")
        if demand is not None and abs(float(v) - float(demand[i])) > 1e-6:
            raise _Fail(CrisisParseError.DEMAND_MISMATCH,
                        f"{name} needs {_fmt_demand(demand)}; {key} {_short(v)} differs (a task runs with its own "
                        f"demand: give it or leave the amounts out)")


def _fmt_demand(d) -> str:
    return f"cpu {_num(d[0])}, memory {_num(d[1])}, gpu {_num(d[2])}"


def _num(v) -> str:
    return np.format_float_positional(float(v), trim="-")


def _short(v: Any) -> str:
    s = json.dumps(v) if isinstance(v, (str, int, float, bool, type(None))) else type(v).__name__
    return s if len(s) <= 40 else s[:37] + "..."


def _read(text: str, ids: list, demands: Optional[np.ndarray]) -> tuple[int, str]:
    obj = next((o for o in _objects(text) if _get(o, _ACTION_KEYS)[0] is not None), None)
    if obj is None:
        raise _Fail(CrisisParseError.MISSING_ACTION_TYPE,
                    'the JSON object has no action_type; use "request_resource", "release_resource" or "wait"')
    key, word = _get(obj, _ACTION_KEYS)
    if not isinstance(word, str) or word.strip().lower() not in _ACTION_WORDS:
        raise _Fail(CrisisParseError.UNKNOWN_ACTION_TYPE,
                    f'{key} {_short(word)} is not one of "request_resource", "release_resource", "wait"')
    base = _ACTION_WORDS[word.strip().lower()]
    notes: list = []
    t_key, t_val = _get(obj, _TASK_KEYS)
    slot = 0
    if base == Base.REQUEST:
        if t_key is None:
            raise _Fail(CrisisParseError.MISSING_TASK, f"request_resource needs a task_id: one of {', '.join(ids)}")
        slot = _slot(t_val, ids)
        _amounts(obj, None if demands is None else demands[slot], ids[slot])
    else:
        if t_key is not None:
            notes.append(f"{t_key} ignored for {_BASE_NAME[base]}")
        _amounts(obj, None, _BASE_NAME[base])  # still checked: a malformed claim is an error
    stance = _stance(obj, notes)
    extra = sorted(str(k) for k in obj if str(k).lower() not in _KNOWN)
    if extra:
        notes.append("ignored field(s): " + ", ".join(extra[:8]) + (" ..." if len(extra) > 8 else ""))
    return encode(base, stance, slot), "; ".join(notes)


def parse(text: Any, max_tasks: int = 4, names: Optional[Sequence[str]] = None,
          demands: Optional[np.ndarray] = None) -> CrisisParseResult:
    """Read one crisis-v0 action from a reply. Never raises; on failure INVALID_FLAT (-1) and the error code.

    `names`: the seat's slot names (see `slot_names`; default `task_<k>`); `demands`: (K, 3)
    cores, RAM, GPU of the seat's slots, to check a claim (no check when None).
    """
    try:
        K = int(max_tasks)
        ids = slot_names(K, names)
        if text is None:
            raise _Fail(CrisisParseError.EMPTY, 'empty reply; answer with one JSON action, e.g. {"action_type": "wait"}')
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("utf-8", errors="replace")
        text = str(text)
        if len(text) > MAX_TEXT_CHARS:
            raise _Fail(CrisisParseError.TOO_LONG, f"reply longer than {MAX_TEXT_CHARS} characters")
        if not text.strip():
            raise _Fail(CrisisParseError.EMPTY, 'empty reply; answer with one JSON action, e.g. {"action_type": "wait"}')
        flat, note = _read(text, ids, None if demands is None else np.asarray(demands, np.float64).reshape(K, 3))
        msg = format_action(flat, K, ids)
        return CrisisParseResult(flat, CrisisParseError.OK, f"{msg} ({note})" if note else msg)
    except _Fail as f:
        return CrisisParseResult(INVALID_FLAT, f.error, f.message)
    except Exception as e:  # a bug: report it instead of crashing an agent loop  # pragma: no cover
        return CrisisParseResult(INVALID_FLAT, CrisisParseError.INTERNAL, f"internal parser error: {type(e).__name__}: {e}")


def format_action(flat: Any, max_tasks: int = 4, names: Optional[Sequence[str]] = None) -> str:
    """Canonical JSON of a flat action index; `INVALID(flat index i)` (read as NO_JSON) when out of range."""
    K = int(max_tasks)
    try:
        i = int(flat)
    except (TypeError, ValueError, OverflowError):
        return f"INVALID(flat index {flat!r})"
    if not 0 <= i < (2 + K) * 2:
        return f"INVALID(flat index {i})"
    kind, slot, yields = min(i // 2, Base.REQUEST), max(i // 2 - Base.REQUEST, 0), i % 2 == Nego.YIELD
    obj = {"action_type": _BASE_NAME[Base(kind)]}
    if kind == Base.REQUEST:
        obj["task_id"] = slot_names(K, names)[slot]
    obj["negotiation"] = "yield" if yields else "hold"
    return json.dumps(obj)

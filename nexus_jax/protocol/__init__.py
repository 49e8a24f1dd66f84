"""Text protocol for LLM and human agents (host side, never jitted).

- `parse(text)` -> `ParseResult(action, error, message)`: one structured action read from
  free text; never raises, WAIT plus an error code on failure.
- `render(state, agent, params)`: the prompt text of what that agent sees.
- `format_action(action)` (alias `format`): the canonical text of an action;
  `parse(format_action(a)).action == a` for every action of the flat enumeration.

Syntax, snapping rule and error codes: docs/protocol.md.
"""
from nexus_jax.protocol.parser import (
    DEFAULT_AMOUNT_GRID,
    DEFAULT_NUM_AGENTS,
    ParseError,
    ParseResult,
    canonical,
    format_action,
    parse,
    snap_amount,
    wait_action,
)
from nexus_jax.protocol.render import render, render_event

format = format_action  # the name for it (shadows the builtin only as nexus_jax.protocol.format)

__all__ = [
    "DEFAULT_AMOUNT_GRID",
    "DEFAULT_NUM_AGENTS",
    "ParseError",
    "ParseResult",
    "canonical",
    "format_action",
    "format",
    "parse",
    "render",
    "render_event",
    "snap_amount",
    "wait_action",
]

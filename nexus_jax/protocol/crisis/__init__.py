"""Text protocol of crisis-v0 (host side, never jitted): the seed's structured JSON actions.

- `parse(text, max_tasks, names, demands)` -> `CrisisParseResult(flat, error, message)`: never
  raises; the invalid index -1 (the env
  counts it as an invalid action) plus an error code on failure.
- `render(state, seat, params)`: the prompt text of what that seat sees.
- `format_action(flat)`: the canonical JSON; `parse(format_action(a)).flat == a`.

Syntax and error codes: docs/crisis.md ("Text seat").
"""
from nexus_jax.protocol.crisis.parser import (INVALID_FLAT, MAX_TEXT_CHARS, CrisisParseError, CrisisParseResult, format_action,
                                              parse, slot_names)
from nexus_jax.protocol.crisis.render import SYNTAX_HELP, render, seat_demands, task_names

__all__ = ["INVALID_FLAT", "MAX_TEXT_CHARS", "CrisisParseError", "CrisisParseResult", "SYNTAX_HELP", "format_action", "parse",
           "render", "seat_demands", "slot_names", "task_names"]

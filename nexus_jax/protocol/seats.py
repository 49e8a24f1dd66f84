"""One text seat per text protocol: what the play loop and the OpenEnv adapter need to drive a seat through text.

`text_seat(env)` gives the `TextSeat` of the protocol the env names (`env.spec.text_protocol`):
`render` (the prompt), `parse` (reply -> action, never raising), `rows` (the actions the env's
step takes, one row per external seat), `flat` (a parsed action's index in the flat
enumeration), `env_errors` and `utility` (per seat, after a step), `random_rows` (uniformly
random valid actions, the default for the other seats), and `action_format`, the env option
its parsed actions need.

- nexus-v0: the seed's command syntax (`nexus_jax.protocol`), structured (5,) action rows.
- crisis-v0: the seed's JSON actions (`nexus_jax.protocol.crisis`), (1,) flat-index rows; the
  env has no NPCs, so every other seat is the caller's (`other_policy`); "utility" is each
  seat's task completion rate so far.
The protocols depend on the envs, never the reverse: an env declares its protocol's name only.
"""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from nexus_jax.envs.crisis import Error
from nexus_jax.envs.nexus.actions import action_table
from nexus_jax.envs.nexus.constants import ErrorCode
from nexus_jax.protocol import crisis as crisis_text
from nexus_jax.protocol.parser import format_action as nexus_format, parse as nexus_parse
from nexus_jax.protocol.render import render as nexus_render

__all__ = ["CrisisTextSeat", "NexusTextSeat", "TEXT_SEATS", "text_seat"]


@jax.jit
def _sample_valid(key, mask):
    return jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf), axis=-1)


class NexusTextSeat:
    """nexus-v0 and its variants: PROPOSE/ACCEPT/... commands; the env takes structured (5,) rows."""

    width = 5
    action_format = "structured"  # parsed text is a structured (5,) row
    fallback = "WAIT"  # what an unreadable reply becomes

    def __init__(self, env: Any):
        self.env = env
        self.params = env.default_params
        self.table = action_table(self.params.num_agents, self.params.num_levels)

    def render(self, state, seat: int, feedback: Optional[str] = None, include_help: bool = True) -> str:
        return nexus_render(state, seat, self.params, feedback=feedback, include_help=include_help)

    def parse(self, text: Any, state, seat: int):
        return nexus_parse(text, params=self.params)

    def flat(self, res) -> int:
        return int(res.flat(self.params.num_agents, self.params.num_levels))

    def format(self, row, seat: int) -> str:
        """One seat's action row (5,) as the command text the parser reads."""
        return nexus_format(row, params=self.params)

    def rows(self, actions) -> np.ndarray:
        """The external seats' actions in the env's `action_format`, (L,) flat or compact or (L, 5) structured
        -> (L, 5) int32 (a compact index through its seat's table: `env.external_actions`)."""
        a = np.asarray(actions)
        if a.ndim == 1 and getattr(self.env, "action_format", "flat") == "compact":
            a = np.asarray(self.env.external_actions(a, self.params))
        return (self.table[a] if a.ndim == 1 else a).astype(np.int32).reshape(-1, self.width)

    def env_errors(self, info, state) -> np.ndarray:
        return np.asarray(info["error_code"], np.int32)

    def error_name(self, code: int) -> str:
        return ErrorCode(code).name if 0 <= code < len(ErrorCode) else str(code)

    def utility(self, info, state) -> np.ndarray:
        return np.asarray(info["utility"], np.float32)

    def random_rows(self, key, state) -> np.ndarray:
        masks = self.env.get_avail_actions(state)
        return self.rows(np.asarray(_sample_valid(key, jnp.stack([masks[a] for a in self.env.agents]))))


class CrisisTextSeat:
    """crisis-v0 and its levels: JSON actions; the env takes (A,) flat indices, here (1,) rows."""

    width = 1
    action_format = "flat"
    fallback = "an invalid action (WAIT, with the invalid-action penalty)"  # parser's INVALID_FLAT

    def __init__(self, env: Any):
        self.env = env
        self.params = env.default_params
        self.names = crisis_text.task_names(self.params)

    def render(self, state, seat: int, feedback: Optional[str] = None, include_help: bool = True) -> str:
        return crisis_text.render(state, seat, self.params, feedback=feedback, include_help=include_help)

    def parse(self, text: Any, state, seat: int):
        return crisis_text.parse(text, self.params.max_tasks, self.names[seat], crisis_text.seat_demands(state, seat))

    def flat(self, res) -> int:
        return int(res.flat)

    def format(self, row, seat: int) -> str:
        """One seat's action row (1,) as the JSON action the parser reads, with the seat's task ids."""
        return crisis_text.format_action(int(np.asarray(row).reshape(-1)[0]), self.params.max_tasks, self.names[seat])

    def rows(self, actions) -> np.ndarray:
        """(L,) or (L, 1) flat indices -> (L, 1) int32."""
        return np.asarray(actions).astype(np.int32).reshape(-1, self.width)

    def env_errors(self, info, state) -> np.ndarray:
        return np.asarray(info["error_code"], np.int32)

    def error_name(self, code: int) -> str:
        return Error(code).name if 0 <= code < len(Error) else str(code)

    def utility(self, info, state) -> np.ndarray:
        return np.asarray(info["seat_completion_rate"], np.float32)

    def random_rows(self, key, state) -> np.ndarray:
        mask = self.env.avail_actions_array(state, self.params)
        return self.rows(np.asarray(_sample_valid(key, mask)))


TEXT_SEATS = {"nexus": NexusTextSeat, "crisis": CrisisTextSeat}  # `EnvSpec.text_protocol` -> its seat


def text_seat(env: Any):
    """The TextSeat of the env's text protocol (`env.spec.text_protocol`); an env without one is a ValueError."""
    name = env.spec.text_protocol
    if name not in TEXT_SEATS:
        raise ValueError(f"no text protocol for {env.name}: its spec names {name!r}; text protocols: "
                         f"{sorted(TEXT_SEATS)}")
    return TEXT_SEATS[name](env)

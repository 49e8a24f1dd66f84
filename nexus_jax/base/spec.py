"""What an env offers, declared once by the env: `env.spec`, an `EnvSpec`.

Adapters, the text protocol, the play loop and the trainers ask `env.spec` instead of testing
the env's type or id, so a new env is served by every consumer that its spec allows, and an
env's capabilities are written in one place (its class).

Heuristics share one signature, whatever the env:

    heuristic(key, state, params) -> actions of every seat, stacked (N, ...) int32

one env (no batch axis: `jax.vmap` it), jittable, `state` the state before the step; the
rows are in the env's own action layout, the one its functional core steps all seats with
(Nexus: structured (N, 5) rows; CrisisCompute: flat (A,) indices). A caller keeps the rows
of the seats it drives (`[seats]`). A heuristic is a reference policy, not a learner: it
may use the key (Nexus NPCs draw noise) or ignore it (CrisisCompute's rules).
"""
from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Any, Callable, Mapping, NamedTuple, Optional, Tuple

Heuristic = Callable[[Any, Any, Any], Any]  # (key, state, params) -> (N, ...) int32 actions of every seat


class SlotLayout(NamedTuple):
    """Where an env's task slots sit in one seat's flat observation and which flat actions request them.

    Slot k's features are `obs[obs_offset + k * features : obs_offset + (k + 1) * features]`;
    REQUEST slot k is flat action `first_request + k * actions_per_slot`. The last four are
    feature indices within a slot (-1: the env has no such feature) that the hand-written
    slot rules read (`deadline`: time to the deadline, the earliest-deadline-first key).
    """

    obs_offset: int
    slots: int
    features: int
    first_request: int
    actions_per_slot: int
    deadline: int
    slack: int
    fits: int
    idle_unlocks: int


ACTION_FORMATS = ("flat", "compact", "structured")  # every format an env may declare


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    """An env's capabilities (`env.spec`). The defaults describe the plainest env: flat actions only,
    every seat the caller's, no heuristics, no task slots, no text protocol, no entity view.

    - `action_formats`: the values its `action_format=` option takes, the env's default first.
      "flat": an index of the `Discrete(n)` enumeration; "compact": an index of a small subset of
      it for unmasked learners; "structured": a row of the factored `MultiDiscrete` view, with
      per-head masks from `env.factored_action_masks(state)` (the factored action heads need it).
    - `npc_seats`: it takes `learner_seats=` (the seats the caller drives); the env's NPCs play
      every other seat inside the step. Without it every seat is the caller's.
    - `heuristics`: name -> `Heuristic` (module docstring), the env's hand-written policies.
    - `heuristic_format`: the `action_format` whose actions are the heuristics' rows (the functional
      core's layout: "structured" for Nexus's (5,) rows, "flat" for CrisisCompute's indices), so a caller
      that plays a heuristic through the class makes the env in that format.
    - `reference_heuristic`: the one of them that plays the seats a text session leaves open when
      the env has no NPC seats (None: such seats act at random).
    - `slot_layout`: its task slots (`SlotLayout`), for slot-scoring policies; None without slots.
    - `text_protocol`: the name of its text protocol (`nexus_jax.protocol.seats` maps the name to
      the seat that renders prompts and parses replies); None without one.
    - `entity_obs`: it has `env.entity_obs(state, params, pad_to)`, the per-entity observation.
    - `partner_types`: name -> action type (structured format) of the actions whose `target` field names the
      seat the action addresses (Nexus: PROPOSE, ACCEPT, REJECT, SIGNAL); empty when no action addresses a
      seat. The trainer's advantage alignment reads it to weight the seats an action touched
      (`align_scope=partner`; `align_types` picks some of them by name).
    - `offers`: offer type name -> the names of the types that answer it, all among `partner_types` (Nexus:
      PROPOSE, answered by ACCEPT or REJECT); read by advantage alignment's `align_scope=answered`.
    - `viewer`: the module that draws its states (`envs/<env>/viewer.py`: `KIND`, `TITLE`, `palette()`,
      `frame(state, params, info)`, `figure(frame)`), which `env.render` and `nexus_jax.viz` use; None without.
    """

    action_formats: Tuple[str, ...] = ("flat",)
    npc_seats: bool = False
    heuristics: Mapping[str, Heuristic] = dataclasses.field(default_factory=dict)
    heuristic_format: str = "flat"
    reference_heuristic: Optional[str] = None
    slot_layout: Optional[SlotLayout] = None
    text_protocol: Optional[str] = None
    entity_obs: bool = False
    partner_types: Mapping[str, int] = dataclasses.field(default_factory=dict)
    offers: Mapping[str, Tuple[str, ...]] = dataclasses.field(default_factory=dict)
    viewer: Any = None

    def __post_init__(self):
        unknown = [f for f in self.action_formats if f not in ACTION_FORMATS]
        if not self.action_formats or unknown:
            raise ValueError(f"EnvSpec.action_formats must list some of {ACTION_FORMATS}, got {self.action_formats!r}")
        if self.heuristic_format not in self.action_formats:
            raise ValueError(f"EnvSpec.heuristic_format {self.heuristic_format!r} is not one of its action_formats "
                             f"{self.action_formats}")
        if self.reference_heuristic is not None and self.reference_heuristic not in self.heuristics:
            raise ValueError(f"EnvSpec.reference_heuristic {self.reference_heuristic!r} is not one of its heuristics "
                             f"{sorted(self.heuristics)}")
        object.__setattr__(self, "heuristics", MappingProxyType(dict(self.heuristics)))
        named = set(self.offers) | {a for answers in self.offers.values() for a in answers}
        if not named <= set(self.partner_types):
            raise ValueError(f"EnvSpec.offers names {sorted(named - set(self.partner_types))}, which are not among "
                             f"its partner_types {sorted(self.partner_types)}")
        object.__setattr__(self, "partner_types", MappingProxyType(dict(self.partner_types)))
        object.__setattr__(self, "offers", MappingProxyType({k: tuple(v) for k, v in self.offers.items()}))

    def heuristic(self, name: str) -> Heuristic:
        """The heuristic `name`; a ValueError naming the ones this env has otherwise."""
        if name not in self.heuristics:
            raise ValueError(f"no heuristic {name!r} in this env; its heuristics: {sorted(self.heuristics) or 'none'}")
        return self.heuristics[name]

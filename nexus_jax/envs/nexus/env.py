"""NexusEnv: the JaxMARL-compatible class over the functional core, and its spaces."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from nexus_jax.base import Box, Discrete, EnvSpec, MultiAgentEnv, MultiDiscrete
from nexus_jax.base.batch_minor import batch_minor
from nexus_jax.base.episode_metrics import EpisodeMetrics
from nexus_jax.envs.nexus import actions as A
from nexus_jax.envs.nexus import compact as C
from nexus_jax.envs.nexus import core, viewer
from nexus_jax.envs.nexus.constants import ActionType as T
from nexus_jax.envs.nexus.dynamics import action_snapshot
from nexus_jax.envs.nexus.entities import observe_entities
from nexus_jax.envs.nexus.metrics import accumulate, init_acc, summarize
from nexus_jax.envs.nexus.observation import observe
from nexus_jax.envs.nexus.params import NexusParams
from nexus_jax.envs.nexus.npc.policy import HEURISTICS
from nexus_jax.envs.nexus.npc.scripted import BASELINES, spec_heuristic
from nexus_jax.envs.nexus.npc.seats import step_with_npcs
from nexus_jax.envs.nexus.validity import factored_masks, flat_mask

MASKS_BATCH_MINOR_FROM = 8  # seats (N = 6: 1.01x, neutral; N = 8 at 64 envs: 1.03x)


class NexusEnv(MultiAgentEnv):
    """Protocol: Nexus. Learner seats are driven by the actions passed in; the rest by jitted NPCs.

    `reset(key, params=None)` / `step(key, state, actions, params=None)` take and return
    dicts keyed by agent name (JaxMARL); `reset_env` / `step_env` are the array-level core.

    `learner_seats` (static: the agent list is static) names the seats the caller drives;
    `agents`, observations, rewards, spaces and `get_avail_actions` cover only those. `None`
    (the constructor default) makes every seat a learner (self-play). Every other seat is
    played by the NPC policy of its archetype (`params.archetypes`, traced) inside `step_env`.

    `action_format` (static) says what one agent's action is; nothing is inferred from values:

    - "flat" (default, SPEC 2): an index of the `Discrete(n)` enumeration of every structured
      action, as a scalar or a `(1,)` array (what JaxMARL's IPPO/MAPPO `unbatchify` produces);
    - "compact": an index of the small `Discrete(K)` subset in `compact.py`, for learners
      without action masks (same shapes as "flat"; same rules: it names a flat action);
    - "structured": a `(5,)` row (type, target, amount_1, amount_2, resource); the action
      space is then the factored `MultiDiscrete([8, N, L, L, 2])`.

    Any other shape or a non-integer dtype is a ValueError at trace time.

    `info_mode` (static): "agents" (default) returns per-learner `(len(agents),)` entries
    (`error_code`, `invalid`, `utility`), the shape JaxMARL's IPPO/MAPPO reshape every info
    leaf to (NUM_ACTORS = num_envs x num_agents); "full" keeps `info` over all N seats (plus
    `rewards_all`, per-step event tables, resource flows and `shock_active`), which
    `nexus_jax.wrappers.LogWrapper`, the trainers and the adapters read.
    """

    INFO_MODES = ("agents", "full")
    ACTION_FORMATS = ("flat", "compact", "structured")
    # NPC seats, the scripted baselines as heuristics (the NPC archetypes, the vault hedge, the passive holders; their
    # rows structured), the command text protocol, the entity view
    spec = EnvSpec(action_formats=ACTION_FORMATS, npc_seats=True,
                   heuristics={**HEURISTICS, **{b.name: spec_heuristic(b.name) for b in BASELINES if b.name not in HEURISTICS}},
                   heuristic_format="structured",
                   text_protocol="nexus", entity_obs=True, viewer=viewer,
                   partner_types={t.name: int(t) for t in (T.PROPOSE, T.ACCEPT, T.REJECT, T.SIGNAL)},
                   offers={"PROPOSE": ("ACCEPT", "REJECT")})
    # SPEC 3's episode metrics over every seat (`metrics.py`); they read the full info (`info_mode="full"`)
    episode_metrics = EpisodeMetrics(lambda state, params: init_acc(state), accumulate, summarize)

    def __init__(self, params: NexusParams, learner_seats: tuple | None = None, info_mode: str = "agents",
                 action_format: str = "flat"):
        if info_mode not in self.INFO_MODES:
            raise ValueError(f"info_mode must be one of {self.INFO_MODES}, got {info_mode!r}")
        if action_format not in self.ACTION_FORMATS:
            raise ValueError(f"action_format must be one of {self.ACTION_FORMATS}, got {action_format!r}")
        self.info_mode = info_mode
        self.action_format = action_format
        self.action_shape = (5,) if action_format == "structured" else ()
        n = params.num_agents
        seats = tuple(range(n)) if learner_seats is None else tuple(int(i) for i in learner_seats)
        if len(set(seats)) != len(seats) or any(not 0 <= i < n for i in seats) or not seats:
            raise ValueError(f"learner_seats must be distinct seats in 0..{n - 1}, at least one, got {learner_seats!r}")
        self.learner_seats = seats
        self.npc_seats = tuple(i for i in range(n) if i not in seats)
        self._learner_idx = jnp.asarray(seats, jnp.int32)
        self._obs_seats = None if not self.npc_seats else seats  # observe only these rows (None: all)
        super().__init__(params, [f"agent_{i}" for i in seats])
        self.num_flat_actions = A.num_flat_actions(n, params.num_levels)
        self.num_actions = C.num_compact_actions(n) if action_format == "compact" else self.num_flat_actions
        obs_dim = jax.eval_shape(lambda k: core.reset(k, params)[0], jax.random.PRNGKey(0)).shape[1]
        self.obs_dim = obs_dim
        self.observation_spaces = {a: Box(-jnp.inf, jnp.inf, (obs_dim,)) for a in self.agents}
        self.factored_action_spaces = {a: MultiDiscrete(A.factored_nvec(n, params.num_levels)) for a in self.agents}
        self.action_spaces = (self.factored_action_spaces if action_format == "structured"
                              else {a: Discrete(self.num_actions) for a in self.agents})

    @classmethod
    def create(cls, learner_seats: tuple | None = None, info_mode: str = "agents", action_format: str = "flat",
               **overrides) -> "NexusEnv":
        return cls(NexusParams.create(**overrides), learner_seats=learner_seats, info_mode=info_mode,
                   action_format=action_format)

    def _mine(self, x):
        """Rows of the learner seats."""
        return x if not self.npc_seats else x[self._learner_idx]

    def reset_env(self, key, params):
        return core.reset(key, params, self._obs_seats)

    def external_actions(self, actions, params):
        """Stacked learner actions in `action_format` -> what the core reads: flat (L,) or structured (L, 5)."""
        actions = jnp.asarray(actions)
        want = (len(self.agents),) + tuple(self.action_shape)
        if tuple(actions.shape) != want or not jnp.issubdtype(actions.dtype, jnp.integer):
            raise self._action_error(f"all {len(self.agents)} agents (step_env)", actions, [want])
        if self.action_format == "compact":
            return C.to_flat(actions.astype(jnp.int32), C.seat_table(params, self.learner_seats))
        return actions.astype(jnp.int32)

    def step_env(self, key, state, actions, params, reset_state=None):
        """The array-level step; with `reset_state`, the returned state is `reset_state` where the episode ended
        (the auto-reset's select, done inside the step: see `step_arrays`)."""
        obs, state, rew, done, info = step_with_npcs(key, state, self.external_actions(actions, params), params,
                                                     self.learner_seats, obs_seats=self._obs_seats,
                                                     reset_state=reset_state)
        if self.info_mode == "agents":
            info = {k: self._mine(info[k]) for k in ("error_code", "invalid", "utility")}
        return obs, state, self._mine(rew), done, info

    def step_arrays(self, key, state, actions, params):
        """The base class's auto-reset (same keys, same values), with the select of each state leaf done
        where the step stores that leaf once (`npc.seats.written_once`) instead of over the stored
        leaves: a kernel less per leaf (env.step 1.07x paired, docs/performance.md). Observations are a
        function of the state alone, so the selected state is observed once."""
        key_step, key_reset = jax.random.split(key)
        _, state_re = self.reset_env(key_reset, params)
        _, state, rew, done, info = self.step_env(key_step, state, actions, params, reset_state=state_re)
        return self.get_obs_array(state, params), state, rew, done, info

    def get_obs_array(self, state, params):
        return observe(state, params, self._obs_seats)

    def entity_obs(self, state, params=None, pad_to: int | None = None):
        """The learner seats' entity views (an `EntityObs`, leading axis L; see entities.py), beside the flat obs.

        `pad_to` (static): seat rows for that many seats (masked padding), so views of different N stack.
        """
        return observe_entities(state, self._params(params), self.learner_seats, pad_to)

    def avail_actions_array(self, state, params):
        mask = self.flat_avail_actions(state, params)
        if self.action_format == "compact":
            return C.compact_mask(mask, C.seat_table(params, self.learner_seats))
        return mask

    def flat_avail_actions(self, state, params=None):
        """(L, n) masks over the full flat enumeration, whatever the `action_format`."""
        params = self._params(params)
        return flat_mask(action_snapshot(state, params), params, None if not self.npc_seats else self._learner_idx)

    def factored_action_masks(self, state, params=None):
        """Per-head masks of the factored view (see validity.factored_masks). Under `vmap`, from
        MASKS_BATCH_MINOR_FROM seats on, with the batch as the minor axis where the fast paths are on
        (`base/batch_minor.py`, as `step`): env.step + masks 1.04x at N = 8, 1.09x at 16, 1.11x at 64, but 0.96x at N = 4, where
        the masks' many small outputs cost more to transpose back than they gain (docs/performance.md)."""
        masks = self._factored_masks
        if self.vmap_batch_minor and self.default_params.num_agents >= MASKS_BATCH_MINOR_FROM:
            masks = batch_minor(masks)
        return masks(state, params)

    def _factored_masks(self, state, params):
        return factored_masks(self.flat_avail_actions(state, params), self._params(params))

    def encode(self, structured):
        p = self.default_params
        return A.encode(jnp.asarray(structured), p.num_agents, p.num_levels)

    def decode(self, flat):
        p = self.default_params
        return A.decode(jnp.asarray(flat), p.num_agents, p.num_levels)

    def render(self, state, params=None, info=None):
        """A matplotlib Figure of one unbatched state: trust graph, holdings bars, newest ledger events
        (`viewer.py`; `info`, a full-info step's, marks the seats a shock took from)."""
        return viewer.render(state, self._params(params), info)

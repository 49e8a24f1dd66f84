"""CrisisParams: every number of the CrisisCompute rules, one field each, with its origin.

Static fields (`pytree_node=False`) give shapes; every other field is a traced leaf, so a
sweep can `jax.vmap` over params (the curriculum level included) with one compilation.
Build params with `CrisisParams.create(**overrides)`, which validates concrete values and
names the bad field. Origins: [seed] the CrisisCompute write-up or its original code,
[spec] SPEC.md section 4, [ours] our decision (docs/crisis.md).
"""
from __future__ import annotations

from typing import Any

from flax import struct

from nexus_jax.envs.crisis.constants import Crisis
from nexus_jax.envs.crisis.crises import num_steps
from nexus_jax.envs.crisis.param_fields import build_params


def static_field(default: Any):
    return struct.field(pytree_node=False, default=default)


# Default crisis scenario [spec: outage at hour 3, urgent task at hour 5; the rest ours].
# Columns: kind, start hour, duration hours, magnitude, lowest curriculum level it is active at.
DEFAULT_CRISES = (
    (int(Crisis.RESOURCE_PRESSURE), 2.0, 1.0, 0.25, 2),  # mild: cores/RAM -25% for an hour
    (int(Crisis.GPU_OUTAGE), 3.0, 1.0, 1.0, 3),  # GPU down 3:00-4:00
    (int(Crisis.URGENT_TASK), 5.0, 0.0, 1.0, 3),  # urgent task injected at 5:00
    (int(Crisis.GPU_OUTAGE), 5.0, 0.5, 1.0, 4),  # compound: GPU down again as the urgent task lands
)


@struct.dataclass
class CrisisParams:
    # ---- static: shapes ---------------------------------------------------------------------
    num_agents: int = static_field(3)  # seats: data_loader, data_cleaner, ml_trainer [spec]
    max_tasks: int = static_field(4)  # task slots per seat (3 default tasks + 1 urgent) [ours]
    max_crises: int = static_field(4)  # crisis schedule length [ours]
    dependency_features: bool = static_field(False)  # opt-in: 5 more features per task slot, what its finish
    #                                                  leads to in the dependency graph (dependencies.py; issue 21) [ours]

    # ---- cluster ----------------------------------------------------------------------------
    total_cores: Any = 16.0  # CPU cores [spec]
    total_ram: Any = 32.0  # GB [spec]
    total_gpu: Any = 1.0  # GPUs [spec]

    # ---- time -------------------------------------------------------------------------------
    episode_hours: Any = 8.0  # episode length [spec]
    minutes_per_step: Any = 10.0  # one step of wall-clock [spec]

    # ---- task set (None: the default set of tasks.py) -----------------------------------------
    task_source: Any = 0  # 0 the fixed set below, 1 a random set per reset (generate_task_set) [spec]
    task_exists: Any = None  # (A, K) bool [seed]
    task_urgent: Any = None  # (A, K) bool, released by an URGENT_TASK crisis [ours]
    task_cores: Any = None  # (A, K) cores needed [seed]
    task_ram: Any = None  # (A, K) GB needed [seed]
    task_gpu: Any = None  # (A, K) GPUs needed [seed]
    task_duration_min: Any = None  # (A, K) minutes of allocated time [seed]
    task_deadline_h: Any = None  # (A, K) deadline hour (urgent: hours after injection) [seed]
    task_deps: Any = None  # (A*K, A*K) bool, deps[t, u]: t needs u [seed]

    # ---- random task generator (task_source = 1) ------------------------------------------------
    gen_task_prob: Any = 0.75  # slot holds a task (slot 0 always does) [ours]
    gen_cores_min: Any = 1.0  # [ours]
    gen_cores_max: Any = 6.0  # [ours]
    gen_ram_min: Any = 2.0  # [ours]
    gen_ram_max: Any = 12.0  # [ours]
    gen_gpu_prob: Any = 0.1  # GPU need for seats before the last [ours]
    gen_gpu_prob_last: Any = 0.8  # GPU need for the last seat (the trainer role) [ours]
    gen_duration_min: Any = 20.0  # minutes [ours]
    gen_duration_max: Any = 90.0  # minutes [ours]
    gen_chain_prob: Any = 0.7  # slot k needs slot k-1 of its seat [ours]
    gen_cross_dep_prob: Any = 0.7  # seat a's slot k needs seat a-1's slot k [ours]
    gen_slack_min: Any = 1.2  # deadline = earliest finish x slack [ours]
    gen_slack_max: Any = 2.0  # [ours]
    gen_urgent_prob: Any = 0.5  # seat 0's last slot is an urgent task [ours]
    gen_urgent_deadline_h: Any = 1.5  # urgent deadline after injection [ours]
    task_default_prob: Any = 0.0  # with task_source random: probability that a reset uses the fixed set instead
                                 # (a training mixture of the default pipeline and random sets; issue 21) [ours]

    # ---- crises -----------------------------------------------------------------------------
    crisis_source: Any = 0  # 0 the schedule below, 1 a random schedule per reset (holdout) [ours]
    crisis_kind: Any = None  # (C,) Crisis id per entry [spec]
    crisis_start_h: Any = None  # (C,) hour it starts [spec]
    crisis_duration_h: Any = None  # (C,) hours it lasts (URGENT_TASK: ignored) [ours]
    crisis_magnitude: Any = None  # (C,) capacity share removed [ours]
    crisis_level: Any = None  # (C,) lowest curriculum level it is active at [ours]
    rand_crisis_probs: Any = (0.4, 0.3, 0.3)  # random kind: GPU_OUTAGE, URGENT_TASK, RESOURCE_PRESSURE [ours]
    rand_crisis_start_min_h: Any = 1.0  # [ours]
    rand_crisis_start_max_h: Any = 6.5  # [ours]
    rand_crisis_duration_min_h: Any = 0.5  # [ours]
    rand_crisis_duration_max_h: Any = 1.5  # [ours]
    rand_crisis_magnitude_min: Any = 0.25  # RESOURCE_PRESSURE share; outages take the whole GPU [ours]
    rand_crisis_magnitude_max: Any = 0.5  # [ours]
    rand_crisis_min_level: Any = (3, 3, 2)  # lowest level per random kind (GPU_OUTAGE, URGENT_TASK, RESOURCE_PRESSURE) [ours]

    # ---- curriculum -------------------------------------------------------------------------
    curriculum_level: Any = 4  # 0..4, traced: one compiled step serves every level [spec]
    negotiation_min_level: Any = 1  # negotiation on from this level [spec]
    level_deadline_slack_h: Any = (1.5, 0.0, 0.0, 0.0, 0.0)  # per level: "easy tasks" at level 0 [ours]
    level_core_cut: Any = (0.0, 0.0, 2.0, 2.0, 4.0)  # per level: cores removed (resource pressure) [ours]
    level_ram_cut: Any = (0.0, 0.0, 4.0, 4.0, 8.0)  # per level: GB removed [ours]

    # ---- negotiation --------------------------------------------------------------------------
    charter_hours: Any = 1.0  # tasks this close to their deadline go first [seed]
    charter_bonus: Any = 5.0  # priority bonus under the charter [seed]
    urgency_pressure: Any = 4.0  # priority = pressure / (hours left + 1) + duration_h + ... [seed]
    reputation_priority: Any = 0.8  # priority per unit reputation [seed]
    contract_ttl: Any = 12  # steps a contract stays open (seed: 2 h) [seed]
    trust_init: Any = 0.5  # T[i, j] at reset [ours]
    trust_honour_rate: Any = 0.2  # honoured: creditor's trust in debtor moves to 1 at this rate [ours]
    trust_break_rate: Any = 0.3  # broken: creditor's trust in debtor moves to 0 at this rate [ours]
    public_break_rate: Any = 0.05  # broken: everyone's trust in the debtor moves to 0 [ours]
    belief_rate: Any = 0.35  # EMA rate of peer-demand beliefs [seed]
    yield_belief_decay: Any = 0.8  # yield-probability belief: p <- decay p + (1 - decay) yielded [seed]
    belief_init: Any = (2.0, 6.0, 0.3, 0.4)  # initial belief: cores, RAM, GPU, yield prob [seed]

    # ---- reward -----------------------------------------------------------------------------
    w_individual: Any = 0.6  # [spec]
    w_team: Any = 0.4  # [spec]
    on_time_base: Any = 12.0  # completion on time [seed]
    early_bonus_per_hour: Any = 1.5  # [seed]
    on_time_bonus: Any = 2.0  # [seed]
    late_base: Any = 10.0  # completion late: late_base - late_rate x hours late, floor 0 [seed]
    late_rate: Any = 1.5  # [seed]
    late_penalty_cap: Any = 4.0  # extra -min(cap, hours late) [seed]
    wait_penalty: Any = 0.2  # per 10 minutes waiting with ready work [seed]
    missed_deadline_penalty: Any = 3.0  # once per task whose deadline passes undone [seed]
    invalid_penalty: Any = 1.0  # per invalid action [spec]
    team_completion: Any = 20.0  # x completion rate [seed]
    team_on_time: Any = 20.0  # x on-time rate [seed]
    team_incomplete: Any = 10.0  # x incomplete share [seed]
    team_all_done: Any = 20.0  # when every task is done on time [seed]
    team_fairness: Any = 4.0  # x Jain index of per-seat completion rates [seed]
    team_broken_contract: Any = 1.5  # per contract broken this step [seed]
    team_reward_mode: Any = 0  # 0 "delta": change of the team score; 1 "level": the score each step (seed) [ours]
    reward_share: Any = 0.0  # share of each seat's reward replaced by the seats' mean: a training option (1 = every
    #                          seat is paid the team's mean, so a learner optimises the total reward) [ours]
    obs_clip: Any = 10.0  # observation values are clipped to +-this [ours]

    @property
    def num_slots(self) -> int:
        return self.num_agents * self.max_tasks

    @property
    def max_steps(self):
        """Episode length in steps (what train.learner_env.LearnerEnv reads); traced if the params are."""
        return num_steps(self)

    @classmethod
    def create(cls, **overrides: Any) -> "CrisisParams":
        """Validated params: an unknown field or a bad value raises ValueError/TypeError naming the field,
        the value and what was expected (param_fields.py)."""
        return build_params(cls, overrides, DEFAULT_CRISES, {"team_reward_mode": TEAM_REWARD_MODES,
                                                             "task_source": TASK_SOURCES,
                                                             "crisis_source": CRISIS_SOURCES})


TEAM_REWARD_MODES = {"delta": 0, "level": 1}
TASK_SOURCES = {"default": 0, "fixed": 0, "random": 1}
CRISIS_SOURCES = {"schedule": 0, "random": 1}

"""CrisisParams: every number of the CrisisCompute rules, one field each, with its origin.

Static fields (`pytree_node=False`) give shapes; every other field is a traced leaf, so a
sweep can `jax.vmap` over params (the curriculum level included) with one compilation.
Build params with `CrisisParams.create(**overrides)`, which validates concrete values and
names the bad field. Each field is `param(default, origin, doc)` (`nexus_jax.base.fields`):
its one-line meaning and its origin, "seed" (the CrisisCompute write-up or its original code),
"spec" (SPEC.md section 4) or "ours" (our decision, docs/crisis.md), kept as metadata the
documentation's params table is generated from; the accepted values are
`param_fields.field_spec(name)`.
"""
from __future__ import annotations

from typing import Any

from flax import struct

from nexus_jax.base.fields import param
from nexus_jax.envs.crisis.constants import Crisis
from nexus_jax.envs.crisis.crises import num_steps
from nexus_jax.envs.crisis.param_fields import build_params


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
    num_agents: int = param(3, "spec", "A seats: data_loader, data_cleaner, ml_trainer", static=True)
    max_tasks: int = param(4, "ours", "K task slots per seat (3 default tasks + 1 urgent)", static=True)
    max_crises: int = param(4, "ours", "C, the length of the crisis schedule", static=True)
    dependency_features: bool = param(False, "ours", "opt-in: 5 more observation features per task slot, what its "
                                                     "finish leads to in the dependency graph", static=True)

    # ---- cluster ----------------------------------------------------------------------------
    total_cores: Any = param(16.0, "spec", "CPU cores of the cluster")
    total_ram: Any = param(32.0, "spec", "GB of RAM of the cluster")
    total_gpu: Any = param(1.0, "spec", "GPUs of the cluster")

    # ---- time -------------------------------------------------------------------------------
    episode_hours: Any = param(8.0, "spec", "episode length in hours")
    minutes_per_step: Any = param(10.0, "spec", "minutes of wall-clock one step stands for")

    # ---- task set (None: the default set of tasks.py) -----------------------------------------
    task_source: Any = param(0, "spec", "0 ('fixed'): the task_* set; 1 ('random'): a random set per reset")
    task_exists: Any = param(None, "seed", "slot holds a task (None: the default task set)")
    task_urgent: Any = param(None, "ours", "the task is released by an URGENT_TASK crisis")
    task_cores: Any = param(None, "seed", "cores the task needs")
    task_ram: Any = param(None, "seed", "GB the task needs")
    task_gpu: Any = param(None, "seed", "GPUs the task needs")
    task_duration_min: Any = param(None, "seed", "minutes of allocated time the task needs")
    task_deadline_h: Any = param(None, "seed", "deadline hour (urgent tasks: hours after injection)")
    task_deps: Any = param(None, "seed", "deps[t, u]: task slot t needs slot u finished")

    # ---- random task generator (task_source = 1) ------------------------------------------------
    gen_task_prob: Any = param(0.75, "ours", "chance a slot holds a task (slot 0 always does)")
    gen_cores_min: Any = param(1.0, "ours", "least cores a task needs")
    gen_cores_max: Any = param(6.0, "ours", "most cores a task needs")
    gen_ram_min: Any = param(2.0, "ours", "least GB a task needs")
    gen_ram_max: Any = param(12.0, "ours", "most GB a task needs")
    gen_gpu_prob: Any = param(0.1, "ours", "chance a task of a seat before the last needs the GPU")
    gen_gpu_prob_last: Any = param(0.8, "ours", "chance a task of the last seat (the trainer role) needs the GPU")
    gen_duration_min: Any = param(20.0, "ours", "shortest task, minutes")
    gen_duration_max: Any = param(90.0, "ours", "longest task, minutes")
    gen_chain_prob: Any = param(0.7, "ours", "chance slot k needs slot k-1 of its seat")
    gen_cross_dep_prob: Any = param(0.7, "ours", "chance seat a's slot k needs seat a-1's slot k")
    gen_slack_min: Any = param(1.2, "ours", "least deadline slack: deadline = earliest finish x slack")
    gen_slack_max: Any = param(2.0, "ours", "most deadline slack")
    gen_urgent_prob: Any = param(0.5, "ours", "chance seat 0's last slot is an urgent task")
    gen_urgent_deadline_h: Any = param(1.5, "ours", "an urgent task's deadline, hours after injection")
    # A training mixture of the default pipeline and random task sets.
    task_default_prob: Any = param(0.0, "ours", "with task_source random: chance a reset uses the fixed set instead")

    # ---- crises -----------------------------------------------------------------------------
    crisis_source: Any = param(0, "ours", "0 ('schedule'): the crisis_* schedule; 1 ('random'): a random schedule "
                                          "per reset (the holdout)")
    crisis_kind: Any = param(None, "spec", "Crisis id per schedule entry (None: the default scenario)")
    crisis_start_h: Any = param(None, "spec", "hour each crisis starts")
    crisis_duration_h: Any = param(None, "ours", "hours each crisis lasts (URGENT_TASK: ignored)")
    crisis_magnitude: Any = param(None, "ours", "share of the capacity each crisis removes")
    crisis_level: Any = param(None, "ours", "lowest curriculum level each crisis is active at")
    rand_crisis_probs: Any = param((0.4, 0.3, 0.3), "ours", "chance of each random kind: GPU_OUTAGE, URGENT_TASK, "
                                                            "RESOURCE_PRESSURE")
    rand_crisis_start_min_h: Any = param(1.0, "ours", "earliest start hour of a random crisis")
    rand_crisis_start_max_h: Any = param(6.5, "ours", "latest start hour of a random crisis")
    rand_crisis_duration_min_h: Any = param(0.5, "ours", "shortest random crisis, hours")
    rand_crisis_duration_max_h: Any = param(1.5, "ours", "longest random crisis, hours")
    rand_crisis_magnitude_min: Any = param(0.25, "ours", "least RESOURCE_PRESSURE share (outages take the whole GPU)")
    rand_crisis_magnitude_max: Any = param(0.5, "ours", "most RESOURCE_PRESSURE share")
    rand_crisis_min_level: Any = param((3, 3, 2), "ours", "lowest curriculum level of each random kind (GPU_OUTAGE, "
                                                          "URGENT_TASK, RESOURCE_PRESSURE)")

    # ---- curriculum -------------------------------------------------------------------------
    curriculum_level: Any = param(4, "spec", "level 0..4; traced, so one compiled step serves every level")
    negotiation_min_level: Any = param(1, "spec", "negotiation is on from this level")
    level_deadline_slack_h: Any = param((1.5, 0.0, 0.0, 0.0, 0.0), "ours", "hours added to deadlines, per level "
                                                                           "(easy tasks at level 0)")
    level_core_cut: Any = param((0.0, 0.0, 2.0, 2.0, 4.0), "ours", "cores removed, per level (resource pressure)")
    level_ram_cut: Any = param((0.0, 0.0, 4.0, 4.0, 8.0), "ours", "GB removed, per level")

    # ---- negotiation --------------------------------------------------------------------------
    charter_hours: Any = param(1.0, "seed", "tasks this close to their deadline go first (the emergency charter)")
    charter_bonus: Any = param(5.0, "seed", "priority bonus under the charter")
    urgency_pressure: Any = param(4.0, "seed", "priority = urgency_pressure / (hours left + 1) + duration_h + ...")
    reputation_priority: Any = param(0.8, "seed", "priority per unit of reputation")
    contract_ttl: Any = param(12, "seed", "steps a contract stays open (the seed's 2 hours)")
    trust_init: Any = param(0.5, "ours", "every T[i, j] at reset")
    trust_honour_rate: Any = param(0.2, "ours", "honoured contract: the creditor's trust in the debtor moves toward 1 "
                                                "at this rate")
    trust_break_rate: Any = param(0.3, "ours", "broken contract: the creditor's trust in the debtor moves toward 0 at "
                                               "this rate")
    public_break_rate: Any = param(0.05, "ours", "broken contract: everyone's trust in the debtor moves toward 0 at "
                                                 "this rate")
    belief_rate: Any = param(0.35, "seed", "EMA rate of the beliefs about peers' demand")
    yield_belief_decay: Any = param(0.8, "seed", "yield-probability belief: p <- decay p + (1 - decay) yielded")
    belief_init: Any = param((2.0, 6.0, 0.3, 0.4), "seed", "initial belief: cores, RAM, GPU, yield probability")

    # ---- reward -----------------------------------------------------------------------------
    w_individual: Any = param(0.6, "spec", "weight of the individual reward")
    w_team: Any = param(0.4, "spec", "weight of the team reward")
    on_time_base: Any = param(12.0, "seed", "reward for a task completed on time")
    early_bonus_per_hour: Any = param(1.5, "seed", "... plus this per hour early")
    on_time_bonus: Any = param(2.0, "seed", "... plus this")
    late_base: Any = param(10.0, "seed", "a late completion pays max(0, late_base - late_rate x hours late)")
    late_rate: Any = param(1.5, "seed", "reward lost per hour late")
    late_penalty_cap: Any = param(4.0, "seed", "a late completion also costs min(late_penalty_cap, hours late)")
    wait_penalty: Any = param(0.2, "seed", "per 10 minutes waiting with ready work")
    missed_deadline_penalty: Any = param(3.0, "seed", "once per task whose deadline passes undone")
    invalid_penalty: Any = param(1.0, "spec", "per invalid action")
    team_completion: Any = param(20.0, "seed", "team score per unit of completion rate")
    team_on_time: Any = param(20.0, "seed", "team score per unit of on-time rate")
    team_incomplete: Any = param(10.0, "seed", "team score lost per unit of incomplete share")
    team_all_done: Any = param(20.0, "seed", "team score when every task is done on time")
    team_fairness: Any = param(4.0, "seed", "team score per unit of the Jain index of per-seat completion rates")
    team_broken_contract: Any = param(1.5, "seed", "team reward lost per contract broken this step")
    team_reward_mode: Any = param(0, "ours", "0 ('delta'): the team reward is the change of the team score; "
                                             "1 ('level', the seed's): the score each step")
    # A training option: at 1 every seat is paid the team's mean, so a learner optimises the total reward.
    reward_share: Any = param(0.0, "ours", "share of each seat's reward replaced by the seats' mean")
    obs_clip: Any = param(10.0, "ours", "observation values are clipped to +- this")

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

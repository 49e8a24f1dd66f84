"""CrisisState: the whole cluster, task progress and social state as one pytree."""
from __future__ import annotations

import jax
from flax import struct

from nexus_jax.envs.crisis.tasks import TaskSet


@struct.dataclass
class CrisisSchedule:
    """The episode's crises, fixed at reset (from params or the random generator)."""

    kind: jax.Array  # (C,) int Crisis
    start_step: jax.Array  # (C,) int, first step it is active
    end_step: jax.Array  # (C,) int, first step it is no longer active
    magnitude: jax.Array  # (C,) float, capacity share removed
    enabled: jax.Array  # (C,) bool, active at this episode's curriculum level


@struct.dataclass
class Counters:
    """Episode totals for metrics."""

    invalid: jax.Array  # (A,) int, invalid actions
    waiting_steps: jax.Array  # (A,) int, steps waiting with ready work
    missed: jax.Array  # (A,) int, deadlines that passed undone
    contracts_made: jax.Array  # () int
    contracts_honoured: jax.Array  # () int
    contracts_broken: jax.Array  # () int
    contracts_expired: jax.Array  # () int
    belief_accuracy_sum: jax.Array  # () float, sum over steps of the mean belief accuracy
    charter_steps: jax.Array  # () int, steps the emergency charter fired
    conflict_steps: jax.Array  # () int, steps requests exceeded free capacity


@struct.dataclass
class CrisisState:
    step: jax.Array  # () int, steps taken this episode
    level: jax.Array  # () int, curriculum level of this episode (from params at reset)
    tasks: TaskSet  # this episode's task set; deadlines absolute (urgent ones set on injection)
    released: jax.Array  # (A, K) bool, visible and requestable (urgent: after injection)
    progress_min: jax.Array  # (A, K) float, allocated minutes so far
    done: jax.Array  # (A, K) bool
    completed_h: jax.Array  # (A, K) float, hour finished (0 while not done)
    missed: jax.Array  # (A, K) bool, deadline passed while undone (penalised once)
    running_slot: jax.Array  # (A,) int, slot whose resources the seat holds; -1 none
    capacity: jax.Array  # (3,) float, cores/RAM/GPU usable now (after level and crises)
    schedule: CrisisSchedule
    urgent_fired: jax.Array  # () bool, urgent tasks already injected
    trust: jax.Array  # (A, A) float, T[i, j] = how much i trusts j
    contract_open: jax.Array  # (A, A) bool, [creditor, debtor]: debtor owes creditor a yield
    contract_age: jax.Array  # (A, A) int, steps since made
    beliefs: jax.Array  # (A, A, 4) float, [observer, peer]: predicted cores, RAM, GPU, yield prob
    last_requested: jax.Array  # (A,) bool, intent broadcast last step
    last_demand: jax.Array  # (A, 3) float, demand of last step's intent
    last_yielded: jax.Array  # (A,) bool
    last_error: jax.Array  # (A,) int Error
    last_outcome: jax.Array  # (A, NUM_OUTCOMES) bool
    last_belief_accuracy: jax.Array  # (A,) float
    team_score: jax.Array  # () float, team score after the last step (delta reward)
    counters: Counters

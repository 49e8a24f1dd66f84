"""Enumerations of the CrisisCompute rules: resources, action kinds, crises, error and outcome codes."""
from enum import IntEnum

# Resource dimensions of the cluster, in this order everywhere (capacity, demand, usage).
CORES = 0
RAM = 1
GPU = 2  # one line each: the API reference (griffe) reads no tuple assignment
NUM_RESOURCES = 3

# Seat roles of the default task set (seat i plays ROLE_NAMES[i]).
ROLE_NAMES = ("data_loader", "data_cleaner", "ml_trainer")


class Base(IntEnum):
    """Base part of a flat action; REQUEST is followed by one entry per task slot."""

    WAIT = 0
    RELEASE = 1
    REQUEST = 2  # REQUEST + k: request the resources of own task slot k


class Nego(IntEnum):
    """Negotiation choice combined with every base action; used when requests exceed capacity."""

    HOLD = 0
    YIELD = 1


class Crisis(IntEnum):
    NONE = 0
    GPU_OUTAGE = 1  # GPU capacity x (1 - magnitude) for the span
    URGENT_TASK = 2  # releases every urgent task of the task set
    RESOURCE_PRESSURE = 3  # cores and RAM x (1 - magnitude) for the span


NUM_CRISIS_KINDS = len(Crisis)


class Error(IntEnum):
    """Why the agent's last action was invalid (it became WAIT)."""

    NONE = 0
    OUT_OF_RANGE = 1  # action index not in the Discrete(n) enumeration
    NOTHING_TO_RELEASE = 2  # RELEASE with no running task
    ALREADY_RUNNING = 3  # REQUEST while a task of the agent holds resources
    TASK_NOT_READY = 4  # slot empty, not released, done, or dependencies unfinished
    EXCEEDS_CAPACITY = 5  # task needs more than the cluster has now (e.g. GPU during an outage)


NUM_ERRORS = len(Error)


class Outcome(IntEnum):
    """What happened to the agent last step (several may be true)."""

    ALLOCATED = 0  # its request won resources
    DENIED = 1  # its request lost the bargaining (capacity)
    YIELDED = 2  # it yielded under contention
    CHARTER = 3  # its request was under the emergency charter
    PREEMPTED = 4  # a crisis took its running task's resources
    COMPLETED = 5  # one of its tasks finished
    CONTRACT_HONOURED = 6  # a contract owed to it was honoured
    CONTRACT_BROKEN = 7  # a contract owed to it was broken


NUM_OUTCOMES = len(Outcome)
NUM_LEVELS = 5  # curriculum levels 0..4 [spec]
NUM_BELIEF_FEATURES = 4  # predicted cores, RAM, GPU demand and yield probability [seed]

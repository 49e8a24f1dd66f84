"""Enumerations of the Nexus rules: action types, resources, archetypes, ledger kinds, result codes."""
from enum import IntEnum


class ActionType(IntEnum):
    """The eight action types. A structured action is (type, target, amount_1, amount_2, resource)."""

    WAIT = 0
    PROPOSE = 1  # offer amount_1 of `resource` for amount_2 of the other resource
    ACCEPT = 2
    REJECT = 3
    WORK = 4  # spend `resource`, gain the other
    VAULT = 5  # move amount_1 of `resource` into the vault
    UNVAULT = 6  # start a withdrawal of amount_1 of `resource`
    SIGNAL = 7  # promise to PROPOSE >= amount_1 of `resource` for <= amount_2 to target


NUM_ACTION_TYPES = len(ActionType)
# Fields of a structured action, in order (the factored MultiDiscrete heads).
ACTION_FIELDS = ("type", "target", "amount_1", "amount_2", "resource")
TYPE, TARGET, AMOUNT_1, AMOUNT_2, RESOURCE = range(5)


class Resource(IntEnum):
    ENERGY = 0
    COMPUTE = 1


NUM_RESOURCES = 2


class Archetype(IntEnum):
    """Seat archetypes. LEARNER seats are driven by the caller; the rest by jitted NPC heuristics."""

    LEARNER = 0
    BULLY = 1
    ALTRUIST = 2
    TIT_FOR_TAT = 3
    RECIPROCATOR = 4
    CHEATER = 5


NUM_ARCHETYPES = len(Archetype)


class Shock(IntEnum):
    NONE = 0
    SOLAR_FLARE = 1  # hits Energy
    GRID_FAILURE = 2  # hits Compute


NUM_SHOCK_KINDS = len(Shock)


class EventKind(IntEnum):
    """Kinds of public ledger events (EMPTY marks an unused ring slot)."""

    EMPTY = 0
    PROPOSAL = 1
    TRADE = 2
    REJECT = 3
    EXPIRY = 4
    SIGNAL = 5
    HONOURED = 6
    BROKEN = 7
    FORCE_MAJEURE = 8  # a signal broken, or a proposal voided, because a shock took the resource
    SHOCK = 9


NUM_EVENT_KINDS = len(EventKind)


class ErrorCode(IntEnum):
    """Why an action was invalid (OK when it was not). Shown in the actor's next observation."""

    OK = 0
    BAD_TYPE = 1  # type out of range
    BAD_TARGET = 2  # target out of range
    SELF_TARGET = 3
    BAD_AMOUNT = 4  # amount level or resource out of range
    EMPTY_TRADE = 5  # give and want both zero (or a zero VAULT/UNVAULT)
    INSUFFICIENT_RESOURCE = 6  # not enough available (or vaulted) to do it
    INSUFFICIENT_COLLATERAL = 7  # cannot pay the proposal deposit
    CREDIT_LIMIT = 8  # trade volume above what the proposer's reputation allows
    NO_PROPOSAL = 9  # ACCEPT/REJECT with no live proposal from target
    SIGNAL_PENDING = 10  # a SIGNAL to this target is still open
    BAD_INDEX = 11  # flat action index out of range


NUM_ERROR_CODES = len(ErrorCode)


class Outcome(IntEnum):
    """What happened to an agent's affairs this step (flags in its next observation)."""

    TRADE_DONE = 0  # a trade I was party to settled
    MY_PROPOSAL_REJECTED = 1
    MY_PROPOSAL_EXPIRED = 2
    MY_PROPOSAL_VOIDED = 3  # by a shock
    SIGNAL_HONOURED = 4
    SIGNAL_BROKEN = 5
    STARVING = 6  # could not pay upkeep


NUM_OUTCOMES = len(Outcome)


# Per-partner NPC memory slots in the state (see npc/memory.py for their meaning); the core env only carries them.
NPC_MEMORY_SIZE = 6

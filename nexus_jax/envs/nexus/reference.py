"""A pure-Python reference of the Nexus rules: readable, loop-based, one episode at a time.

This is the executable specification (written from SPEC.md section 3 and docs/design.md,
sharing no step code with the JAX env) and the "what people used before" baseline: the
original environment was a Python object stepped one action at a time. Differential
tests (tests/test_reference_diff.py) check that the jitted env agrees with it at every
step; bench/env_throughput.py times it.

Randomness is passed in, so both sides see the same draws: `reset(params, jitter)` takes
the (N, 2) endowment jitter in [-1, 1] (`core.draw_reset_noise`), and `step(actions,
noise)` takes the step's `(shock_u, end_u)` uniforms (`core.draw_step_noise`).

Only the enums (constants.py), the flat action enumeration (actions.action_table) and
parameter values are shared with the JAX side. It covers the rules of `core.step`, where
every seat's action is given; NPC policies choose actions and are not rules, so they are not
here (`npc_memory` is exported as zeros, as `core.step` leaves it). `export_state()` writes this object's state in the field layout of `NexusState` (as the
nested dict `flax.serialization.to_state_dict` gives), so the two can be compared field
by field; `observe()` builds the observation layout of docs/design.md on its own.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from nexus_jax.envs.nexus.actions import action_table
from nexus_jax.envs.nexus.constants import (
    NPC_MEMORY_SIZE,
    NUM_ACTION_TYPES,
    NUM_ERROR_CODES,
    NUM_EVENT_KINDS,
    NUM_OUTCOMES,
    NUM_SHOCK_KINDS,
    ActionType as T,
    ErrorCode as E,
    EventKind as K,
    Outcome as O,
    Shock,
)

ENERGY, COMPUTE = 0, 1


def _scalar(x):
    """A params leaf (0-d array) as a plain Python number."""
    a = np.asarray(x)
    return a.item() if a.dtype.kind in "iub" else float(a)


class Rules:
    """Every number of the rules as a plain Python value, read from a `NexusParams`.

    `real` is the type quantities are computed in: `np.float32` (the default) rounds like
    the JAX env, so exact ties (an agent holding exactly the amount it offers) resolve the
    same way on both sides; `float` (float64) is the plain-Python baseline the benchmark times.
    """

    def __init__(self, params, real=np.float32):
        self.real = real
        self.n = int(params.num_agents)
        self.grid = [real(g) for g in params.amount_grid]
        self.levels = len(self.grid)
        self.ledger_size = int(params.ledger_size)
        self.obs_ledger_events = int(params.obs_ledger_events)
        self.vault_queue_len = int(params.vault_queue_len)
        self.archetypes = [int(a) for a in np.asarray(params.archetypes)]
        self.endowment = [[real(x) for x in row] for row in np.asarray(params.endowment, np.float32)]
        self.income = [[real(x) for x in row] for row in np.asarray(params.income, np.float32)]
        self.upkeep = [real(x) for x in np.asarray(params.upkeep, np.float32)]
        self.wait_cost_types = [real(x) for x in np.asarray(params.wait_cost_types, np.float32)]
        for name in (
            "endowment_jitter", "initial_collateral", "initial_trust", "isolation_window", "isolation_decay",
            "wait_cost", "proposal_deposit", "proposal_ttl", "reject_penalty", "trade_collateral_bonus",
            "base_limit", "limit_per_rep", "work_cost", "work_gain", "work_immunity", "vault_delay",
            "signal_window", "signal_honour_bonus", "signal_trust_multiplier", "signal_break_penalty", "signal_prepay",
            "trust_alpha", "trust_volume_cap", "reject_trust_step", "betrayal_multiplier",
            "public_betrayal_rate", "trust_decay", "trust_fair_ratio", "p_solar_flare", "p_grid_failure", "shock_duration",
            "shock_severity", "shock_progressive", "shock_max_fraction", "shock_storm_factor", "shock_reach", "w_utility",
            "w_collateral", "w_resilience", "resilience_threshold", "invalid_penalty", "reward_mode", "reward_utility", "vault_shaping", "vault_shaping_ramp",
            "max_steps", "early_end_after", "early_end_prob", "obs_scale",
        ):
            value = _scalar(getattr(params, name))
            setattr(self, name, real(value) if isinstance(value, float) else value)


@dataclass
class Agent:
    archetype: int
    available: list  # [E, C], tradable
    escrow: list = field(default_factory=lambda: [0.0, 0.0])  # locked in my pending proposals
    vault: list = field(default_factory=lambda: [0.0, 0.0])  # shock-proof, not counted in utility
    withdrawals: list = field(default_factory=list)  # [arrival_step, resource, amount] in flight
    collateral: float = 20.0
    tax_immunity: int = 0
    last_trade_step: int = 0
    last_error: int = 0
    last_outcome: list = field(default_factory=lambda: [False] * NUM_OUTCOMES)

    def utility(self) -> float:
        """U = min(E_liquid, C_liquid), liquid = available + escrow."""
        return min(self.available[ENERGY] + self.escrow[ENERGY], self.available[COMPUTE] + self.escrow[COMPUTE])

    def held_back(self) -> float:
        """The utility vault and withdrawals in flight would add if they were liquid (the shaping's potential)."""
        held = [self.available[r] + self.escrow[r] + self.vault[r] + sum(w[2] for w in self.withdrawals if w[1] == r)
                for r in (ENERGY, COMPUTE)]
        return min(held) - self.utility()


@dataclass
class Proposal:
    """One slot of the [proposer][target] table; a closed proposal keeps its last values."""

    active: bool = False
    give: float = 0.0  # of `resource`, held in the proposer's escrow
    want: float = 0.0  # of the other resource
    resource: int = 0
    age: int = 0

    @property
    def owed(self) -> float:
        """What the target still pays to take it: the want."""
        return self.want


@dataclass
class Signal:
    """One slot of the [signaller][target] table of public commitments."""

    active: bool = False
    give: float = 0.0  # promise: at least this much of `resource` ...
    want: float = 0.0  # ... for at most this much of the other
    resource: int = 0
    age: int = 0
    shock_hit: bool = False  # a shock in the window left the signaller short
    trust_bonus: bool = False  # honoured: the target's next trust gain in me is multiplied
    prepaid: bool = False  # the target paid `want` ahead (signal_prepay): honouring delivers at once

    @property
    def owed(self) -> float:
        """What the target still pays: the want, 0 once paid ahead."""
        return 0.0 if self.prepaid else self.want


@dataclass
class Event:
    step: int
    kind: int
    actor: int
    target: int
    amount_1: float
    amount_2: float
    resource: int


def toward_one(t: float, rate: float) -> float:
    return 1.0 - (1.0 - t) * (1.0 - rate)


def toward_zero(t: float, rate: float) -> float:
    return t * (1.0 - rate)


class ReferenceNexus:
    """One Nexus episode as plain Python objects. `reset(params, jitter)`, then `step(actions, noise)`."""

    def __init__(self, params=None, real=np.float32):
        self.real = real
        self.rules = Rules(params, real) if params is not None else None

    # ---- reset ---------------------------------------------------------------------------
    def reset(self, params=None, jitter=None):
        """Start an episode. `jitter`: (N, 2) uniforms in [-1, 1] (random if None). -> obs (N, D)."""
        if params is not None:
            self.rules = Rules(params, self.real)
        p = self.rules
        n = p.n
        if jitter is None:
            jitter = np.random.uniform(-1.0, 1.0, (n, 2))
        jitter = np.asarray(jitter, np.float32)
        self.agents = []
        for i, arch in enumerate(p.archetypes):
            start = [p.endowment[arch][r] * (1.0 + p.endowment_jitter * p.real(jitter[i][r])) for r in (0, 1)]
            self.agents.append(Agent(archetype=arch, available=start, collateral=p.initial_collateral))
        self.trust = [[p.initial_trust] * n for _ in range(n)]
        self.proposals = [[Proposal() for _ in range(n)] for _ in range(n)]
        self.signals = [[Signal() for _ in range(n)] for _ in range(n)]
        self.ledger: list[Event] = []  # every public event ever written, oldest first
        self.step_count = 0
        self.shock_kind = Shock.NONE
        self.shock_remaining = 0
        return self.observe()

    # ---- derived quantities ---------------------------------------------------------------
    def reputation(self, j: int) -> float:
        """Mean over i != j of T[i][j]."""
        n = self.rules.n
        return sum(self.trust[i][j] for i in range(n) if i != j) / (n - 1)

    def volume_weight(self, volume: float) -> float:
        cap = self.rules.trust_volume_cap
        return np.log1p(min(max(volume, 1.0), cap)) / np.log1p(cap)

    # ---- validity --------------------------------------------------------------------------
    def check(self, i: int, action) -> int:
        """ErrorCode of agent i's action against the current state (the step's snapshot).

        Checks run in this order and the first failure is reported: type, target range, self
        target, amount/resource range, empty trade, then what the state allows.
        """
        p = self.rules
        kind, j, a1, a2, r = action
        me = self.agents[i]
        if not 0 <= kind < NUM_ACTION_TYPES:
            return E.BAD_TYPE
        if kind == T.WAIT:
            return E.OK
        if kind in (T.PROPOSE, T.SIGNAL, T.ACCEPT, T.REJECT):
            if not 0 <= j < p.n:
                return E.BAD_TARGET
            if j == i:
                return E.SELF_TARGET
        if kind in (T.ACCEPT, T.REJECT):
            offer = self.proposals[j][i]
            promise = self.signals[j][i]
            if kind == T.ACCEPT and not offer.active and p.signal_prepay and promise.active and not promise.prepaid:
                # reliance: pay the open signal's want ahead
                return E.INSUFFICIENT_RESOURCE if me.available[1 - promise.resource] < promise.want else E.OK
            if not offer.active:  # after expiry, every active proposal is live
                return E.NO_PROPOSAL
            if kind == T.ACCEPT and me.available[1 - offer.resource] < offer.want:
                return E.INSUFFICIENT_RESOURCE
            return E.OK
        if r not in (0, 1):
            return E.BAD_AMOUNT
        if kind == T.WORK:
            return E.INSUFFICIENT_RESOURCE if me.available[r] < p.work_cost else E.OK
        if not 0 <= a1 < p.levels:
            return E.BAD_AMOUNT
        if kind in (T.VAULT, T.UNVAULT):  # amount_2 is not used by these types
            if a1 == 0:
                return E.EMPTY_TRADE
            holding = me.available[r] if kind == T.VAULT else me.vault[r]
            return E.INSUFFICIENT_RESOURCE if holding < p.grid[a1] else E.OK
        # PROPOSE or SIGNAL
        if not 0 <= a2 < p.levels:
            return E.BAD_AMOUNT
        if a1 == 0 and a2 == 0:
            return E.EMPTY_TRADE
        if kind == T.SIGNAL:
            return E.SIGNAL_PENDING if self.signals[i][j].active else E.OK
        give, want = p.grid[a1], p.grid[a2]
        if me.available[r] < give:
            return E.INSUFFICIENT_RESOURCE
        if me.collateral < p.proposal_deposit:
            return E.INSUFFICIENT_COLLATERAL
        if give + want > p.base_limit + p.limit_per_rep * self.reputation(i):
            return E.CREDIT_LIMIT
        return E.OK

    def structured(self, actions):
        """N flat indices or N structured rows -> (N structured 5-tuples, flat index out of range per agent)."""
        p = self.rules
        actions = np.asarray(actions)
        if actions.ndim == 2:
            return [tuple(int(x) for x in row) for row in actions], [False] * p.n
        table = action_table(p.n, p.levels)  # the flat enumeration (encoding only, no rules)
        rows, bad = [], []
        for flat in actions.tolist():
            ok = 0 <= flat < len(table)
            rows.append(tuple(int(x) for x in table[flat]) if ok else (-1, 0, 0, 0, 0))
            bad.append(not ok)
        return rows, bad

    # ---- step ----------------------------------------------------------------------------------
    def step(self, actions, noise):
        """actions: N flat indices or N structured (type, target, amount_1, amount_2, resource) rows;
        noise: (shock_u, end_u) or a `StepNoise` (with `reach_u`, one uniform per seat; without, every seat is reached).

        -> (obs (N, D), reward (N,), done, info). Phases run in the order of docs/design.md.
        """
        p = self.rules
        n = p.n
        acts, bad_index = self.structured(actions)
        if hasattr(noise, "shock_u"):
            shock_u, end_u, reach_u = noise.shock_u, noise.end_u, noise.reach_u
        else:  # (shock_u, end_u) or (shock_u, end_u, reach_u)
            shock_u, end_u, reach_u = (*noise, None)[:3]
        shock_u, end_u = p.real(shock_u), p.real(end_u)
        reach_u = [0.0] * n if reach_u is None else [p.real(x) for x in np.asarray(reach_u)]  # None: every seat
        u_before = [a.utility() for a in self.agents]
        held_before = [self._potential(a, False) for a in self.agents]
        collateral_before = [a.collateral for a in self.agents]

        self._events: list[tuple] = []
        self._outcome = [[False] * NUM_OUTCOMES for _ in range(n)]
        self._interacted = [[False] * n for _ in range(n)]
        self._flows = {k: [[0.0, 0.0] for _ in range(n)]
                       for k in ("work_spent", "work_gained", "income", "upkeep", "decay", "shock_loss")}

        self._expire()
        # Every action is judged on this snapshot.
        errors = [E.BAD_INDEX if bad_index[i] else self.check(i, acts[i]) for i in range(n)]
        valid = [e == E.OK for e in errors]
        self._settle(acts, valid)
        self._commit(acts, valid)
        self._own_actions(acts, valid)
        self._economy()
        self._shock(shock_u, reach_u)
        self._trust_decay()

        for ev in self._events:
            self.ledger.append(Event(self.step_count, *ev))
        self.step_count += 1
        for i, a in enumerate(self.agents):
            a.last_error = int(errors[i])
            a.last_outcome = self._outcome[i]

        early = self.step_count > p.early_end_after and end_u < p.early_end_prob
        done = self.step_count >= p.max_steps or early
        rewards = self._reward(u_before, held_before, collateral_before, valid, done)
        info = {
            "error_code": [int(e) for e in errors],
            "invalid": [not v for v in valid],
            "utility": [a.utility() for a in self.agents],
            "flows": self._flows,
        }
        return self.observe(), rewards, done, info

    # 1. expire ------------------------------------------------------------------------------
    def _expire(self):
        p, n = self.rules, self.rules.n
        for a in self.agents:
            a.tax_immunity = max(a.tax_immunity - 1, 0)
        for i in range(n):
            for j in range(n):
                prop = self.proposals[i][j]
                if not prop.active:
                    continue
                prop.age += 1
                if prop.age > p.proposal_ttl:
                    prop.active = False
                    owner = self.agents[i]
                    owner.available[prop.resource] += prop.give
                    owner.escrow[prop.resource] -= prop.give
                    owner.collateral += p.proposal_deposit
                    self._outcome[i][O.MY_PROPOSAL_EXPIRED] = True
                    self._events.append((K.EXPIRY, i, j, prop.give, prop.want, prop.resource))
        broken = []
        for i in range(n):
            for j in range(n):
                sig = self.signals[i][j]
                if not sig.active:
                    continue
                sig.age += 1
                if sig.age > p.signal_window:
                    broken.append((i, j))
        for i, j in broken:
            sig = self.signals[i][j]
            sig.active = sig.prepaid = False  # a payment made ahead stays with the breaker
            self.agents[i].collateral = max(self.agents[i].collateral - p.signal_break_penalty, 0.0)
            self._outcome[i][O.SIGNAL_BROKEN] = True
            self._interacted[i][j] = self._interacted[j][i] = True
            kind = K.FORCE_MAJEURE if sig.shock_hit else K.BROKEN
            self._events.append((kind, i, j, sig.give, sig.want, sig.resource))
        # The betrayed target's trust in the signaller drops, then everyone's (public reputation).
        for i, j in broken:
            self.trust[j][i] = toward_zero(self.trust[j][i], p.betrayal_multiplier * p.trust_alpha)
        for i, _ in broken:
            for k in range(n):
                if k != i:
                    self.trust[k][i] = toward_zero(self.trust[k][i], p.public_betrayal_rate)

    # 2. settle --------------------------------------------------------------------------------
    def _settle(self, acts, valid):
        p, n = self.rules, self.rules.n
        accepts = sorted((acts[i][1], i) for i in range(n) if valid[i] and acts[i][0] == T.ACCEPT)
        trades = [(j, i) for j, i in accepts if self.proposals[j][i].active]
        relies = [(j, i) for j, i in accepts if not self.proposals[j][i].active]  # an open signal paid ahead
        for proposer, acceptor in trades:
            prop = self.proposals[proposer][acceptor]
            pa, ta = self.agents[proposer], self.agents[acceptor]
            r = prop.resource
            pa.escrow[r] -= prop.give
            ta.available[r] += prop.give
            ta.available[1 - r] -= prop.want
            pa.available[1 - r] += prop.want
            w = self.volume_weight(prop.give + prop.want)
            pa.collateral += p.proposal_deposit + p.trade_collateral_bonus * w
            ta.collateral += p.trade_collateral_bonus * w
            # An honoured signal multiplies its target's trust gain in the signaller.
            rate_pt = p.trust_alpha * w * (p.signal_trust_multiplier if self.signals[acceptor][proposer].trust_bonus else 1.0)
            rate_tp = p.trust_alpha * w * (p.signal_trust_multiplier if self.signals[proposer][acceptor].trust_bonus else 1.0)
            self.trust[proposer][acceptor] = toward_one(self.trust[proposer][acceptor], rate_pt)
            if prop.give >= p.trust_fair_ratio * prop.want:  # fair to the acceptor (the terms are the proposer's)
                self.trust[acceptor][proposer] = toward_one(self.trust[acceptor][proposer], rate_tp)
            prop.active = False
            for x in (proposer, acceptor):
                self.agents[x].last_trade_step = self.step_count
                self._outcome[x][O.TRADE_DONE] = True
            self._interacted[proposer][acceptor] = self._interacted[acceptor][proposer] = True
            self._events.append((K.TRADE, proposer, acceptor, prop.give, prop.want, r))
        # Unfair terms move the acceptor's trust in the proposer toward 0, after every trade's gains.
        for proposer, acceptor in trades:
            prop = self.proposals[proposer][acceptor]
            if prop.give < p.trust_fair_ratio * prop.want:
                shortfall = min(max(1.0 - prop.give / max(p.trust_fair_ratio * prop.want, 1e-6), 0.0), 1.0)
                w = self.volume_weight(prop.give + prop.want)
                self.trust[acceptor][proposer] = toward_zero(self.trust[acceptor][proposer], p.trust_alpha * w * shortfall)
        # Trades of one step settle together: a bonus is consumed after every trade of the pair.
        for proposer, acceptor in trades:
            self.signals[proposer][acceptor].trust_bonus = False
            self.signals[acceptor][proposer].trust_bonus = False

        for i in range(n):
            if not (valid[i] and acts[i][0] == T.REJECT):
                continue
            j = acts[i][1]
            prop = self.proposals[j][i]
            owner = self.agents[j]
            owner.available[prop.resource] += prop.give
            owner.escrow[prop.resource] -= prop.give
            owner.collateral = max(owner.collateral + p.proposal_deposit - p.reject_penalty, 0.0)
            self.trust[i][j] = toward_zero(self.trust[i][j], p.reject_trust_step)
            prop.active = False
            self._outcome[j][O.MY_PROPOSAL_REJECTED] = True
            self._interacted[i][j] = self._interacted[j][i] = True
            self._events.append((K.REJECT, i, j, prop.give, prop.want, prop.resource))
        # Reliance after every trade and refusal: the signallers receive, then the targets pay.
        for signaller, target in relies:
            sig = self.signals[signaller][target]
            self.agents[signaller].available[1 - sig.resource] += sig.want
        for signaller, target in relies:
            sig = self.signals[signaller][target]
            self.agents[target].available[1 - sig.resource] -= sig.want
            sig.prepaid = True
            self._interacted[signaller][target] = self._interacted[target][signaller] = True

    # 3. commit --------------------------------------------------------------------------------
    def _commit(self, acts, valid):
        p, n = self.rules, self.rules.n
        proposed, delivered, honoured, signalled, forwards = [], [], [], [], []
        for i in range(n):
            kind, j, a1, a2, r = acts[i]
            if not (valid[i] and kind == T.PROPOSE):
                continue
            me = self.agents[i]
            give, want = p.grid[a1], p.grid[a2]
            old = self.proposals[i][j]
            if old.active:  # replaced: its escrow and deposit come back first
                me.available[old.resource] += old.give
                me.escrow[old.resource] -= old.give
                me.collateral += p.proposal_deposit
            self._interacted[i][j] = self._interacted[j][i] = True
            sig = self.signals[i][j]
            honours = sig.active and sig.resource == r and give >= sig.give and want <= sig.want
            if honours and sig.prepaid:  # a forward: `give` goes to the target at once (a trade; settled below)
                old.active = False
                me.available[r] -= give
                delivered.append((K.TRADE, i, j, give, want, r))
                forwards.append((i, j, give, r, self.volume_weight(give + sig.want)))
            else:
                me.available[r] -= give
                me.escrow[r] += give
                me.collateral -= p.proposal_deposit
                self.proposals[i][j] = Proposal(active=True, give=give, want=want, resource=r, age=0)
                proposed.append((K.PROPOSAL, i, j, give, want, r))
            if honours:
                sig.active = False
                sig.trust_bonus = sig.trust_bonus or not sig.prepaid  # a forward's gain was multiplied at once
                sig.prepaid = False
                me.collateral += p.signal_honour_bonus
                self._outcome[i][O.SIGNAL_HONOURED] = True
                honoured.append((K.HONOURED, i, j, give, want, r))
        # Forwards settle after every proposal of the step: receipts, the trade bonus (giver, then receiver), trust
        # (the giver's in the target, then the target's in the giver at the honoured signal's multiplier).
        for i, j, give, r, _ in forwards:
            self.agents[j].available[r] += give
        for i, j, _, _, w in forwards:
            self.agents[i].collateral += p.trade_collateral_bonus * w
        for i, j, _, _, w in sorted(forwards, key=lambda f: f[1]):
            self.agents[j].collateral += p.trade_collateral_bonus * w
        for i, j, _, _, w in forwards:
            self.trust[i][j] = toward_one(self.trust[i][j], p.trust_alpha * w)
        for i, j, _, _, w in forwards:
            self.trust[j][i] = toward_one(self.trust[j][i], p.trust_alpha * p.signal_trust_multiplier * w)
            for x in (i, j):
                self.agents[x].last_trade_step = self.step_count
                self._outcome[x][O.TRADE_DONE] = True
        for i in range(n):
            kind, j, a1, a2, r = acts[i]
            if not (valid[i] and kind == T.SIGNAL):
                continue
            sig = self.signals[i][j]  # the pair's trust bonus outlives the signal that earned it
            sig.active, sig.give, sig.want, sig.resource, sig.age, sig.shock_hit = True, p.grid[a1], p.grid[a2], r, 0, False
            sig.prepaid = False
            self._interacted[i][j] = self._interacted[j][i] = True
            signalled.append((K.SIGNAL, i, j, p.grid[a1], p.grid[a2], r))
        self._events += proposed + delivered + honoured + signalled

    # 4. own actions ------------------------------------------------------------------------
    def _own_actions(self, acts, valid):
        p = self.rules
        for i, me in enumerate(self.agents):
            kind, _, a1, _, r = acts[i]
            if valid[i] and kind == T.WORK:
                me.available[r] -= p.work_cost
                me.available[1 - r] += p.work_gain
                me.tax_immunity = p.work_immunity
                self._flows["work_spent"][i][r] += p.work_cost
                self._flows["work_gained"][i][1 - r] += p.work_gain
            elif valid[i] and kind == T.VAULT:
                me.available[r] -= p.grid[a1]
                me.vault[r] += p.grid[a1]
            elif valid[i] and kind == T.UNVAULT:
                me.vault[r] -= p.grid[a1]
                me.withdrawals.append([self.step_count + p.vault_delay, r, p.grid[a1]])
            # The patience rule: each action type pays its share of the wait cost; invalid ones as WAIT.
            share = p.wait_cost_types[kind if valid[i] else T.WAIT]
            if me.tax_immunity == 0 and share > 0:
                me.collateral = max(me.collateral - p.wait_cost * share, 0.0)

    # 5. economy ---------------------------------------------------------------------------------
    def _economy(self):
        p = self.rules
        for i, me in enumerate(self.agents):
            arrived = [w for w in me.withdrawals if w[0] == self.step_count]
            me.withdrawals = [w for w in me.withdrawals if w[0] != self.step_count]
            arrivals = [0.0, 0.0]
            for _, r, amount in arrived:
                arrivals[r] += amount
            isolated = self.step_count - me.last_trade_step >= p.isolation_window and me.tax_immunity == 0
            starving = False
            for r in (0, 1):
                income = p.income[me.archetype][r]
                me.available[r] = me.available[r] + arrivals[r] + income
                starving = starving or me.available[r] < p.upkeep[r]
                paid = min(me.available[r], p.upkeep[r])
                me.available[r] -= paid
                self._flows["income"][i][r] = income
                self._flows["upkeep"][i][r] = paid
            if isolated:
                for r in (0, 1):
                    decay = me.available[r] * p.isolation_decay
                    me.available[r] -= decay
                    self._flows["decay"][i][r] = decay
            if starving:
                self._outcome[i][O.STARVING] = True

    # 6. shock -----------------------------------------------------------------------------------
    def _shock(self, u: float, reach_u: list):
        p, n = self.rules, self.rules.n
        was_active = self.shock_remaining > 0
        remaining = max(self.shock_remaining - 1, 0)
        if remaining > 0:  # the current shock goes on; no new one can start
            self.shock_remaining = remaining
            return
        factor = p.shock_storm_factor if was_active else 1.0  # correlated runs: right after a shock
        if u < p.p_solar_flare * factor:
            kind = Shock.SOLAR_FLARE
        elif u < p.p_solar_flare * factor + p.p_grid_failure * factor:
            kind = Shock.GRID_FAILURE
        else:
            self.shock_kind, self.shock_remaining = Shock.NONE, 0
            return
        self.shock_kind, self.shock_remaining = kind, p.shock_duration
        hit = ENERGY if kind == Shock.SOLAR_FLARE else COMPUTE

        liquid = [a.available[hit] + a.escrow[hit] for a in self.agents]
        held_before = [a.available[hit] for a in self.agents]
        mean = sum(liquid) / n
        total = 0.0
        for i, me in enumerate(self.agents):
            above = max(0.0, liquid[i] / mean - 1.0) if mean > 0 else 0.0
            share = min(p.shock_severity * (1.0 + p.shock_progressive * above), p.shock_max_fraction)
            loss = share * liquid[i] if reach_u[i] < p.shock_reach else 0.0  # the seats the shock reaches
            total += loss
            self._flows["shock_loss"][i][hit] = loss
            from_available = min(loss, me.available[hit])
            from_escrow = loss - from_available
            if from_escrow > 0:
                # Escrow is hit: every proposal in that resource is voided; the rest of escrow comes back.
                me.available[hit] = me.escrow[hit] - from_escrow
                me.escrow[hit] = 0.0
                for j in range(n):
                    prop = self.proposals[i][j]
                    if prop.active and prop.resource == hit:
                        prop.active = False
                        me.collateral += p.proposal_deposit
                        self._outcome[i][O.MY_PROPOSAL_VOIDED] = True
                        self._events.append((K.FORCE_MAJEURE, i, j, prop.give, prop.want, prop.resource))
            else:
                me.available[hit] -= from_available
        for i, me in enumerate(self.agents):
            for j in range(n):
                sig = self.signals[i][j]
                # Force majeure only if the shock caused the shortfall: held before, short after.
                if sig.active and sig.resource == hit and held_before[i] >= sig.give > me.available[hit]:
                    sig.shock_hit = True
        self._events.append((K.SHOCK, -1, -1, total, 0.0, hit))

    # 7. trust decay ----------------------------------------------------------------------------
    def _trust_decay(self):
        p, n = self.rules, self.rules.n
        for i in range(n):
            for j in range(n):
                if not self._interacted[i][j]:
                    self.trust[i][j] += p.trust_decay * (0.5 - self.trust[i][j])

    # ---- reward ---------------------------------------------------------------------------------
    def _potential(self, agent, done) -> float:
        """The shaping's potential: held_back x the share still counted (falling over the last
        `vault_shaping_ramp` steps when that is > 0), 0 once the episode ended."""
        p = self.rules
        share = 1.0
        if p.vault_shaping_ramp > 0:
            share = min(max((p.max_steps - self.step_count) / p.vault_shaping_ramp, 0.0), 1.0)
        return 0.0 if done else share * agent.held_back()

    def _reward(self, u_before, held_before, collateral_before, valid, done):
        """SPEC's reward; with `vault_shaping` w, each seat's dU also counts w x the change of what its vault and
        withdrawals would add to U, and after the last step nothing is counted (so an episode's return is unchanged)."""
        p = self.rules
        u_now = [a.utility() for a in self.agents]
        held_now = [self._potential(a, done) for a in self.agents]
        paid = [u_now[i] / p.max_steps if p.reward_utility == 1 else u_now[i] - u_before[i] for i in range(p.n)]
        d_own = [paid[i] + p.vault_shaping * (held_now[i] - held_before[i]) for i in range(p.n)]
        d_system = sum(d_own)
        out = []
        for i, me in enumerate(self.agents):
            d_u = d_own[i] if p.reward_mode == 1 else d_system
            resilient = self.shock_remaining > 0 and u_now[i] > p.resilience_threshold
            out.append(p.w_utility * d_u + p.w_collateral * (me.collateral - collateral_before[i])
                       + p.w_resilience * resilient - p.invalid_penalty * (not valid[i]))
        return out

    # ---- observation ----------------------------------------------------------------------------
    def observe(self) -> np.ndarray:
        """(N, D) float32, the layout of docs/design.md ("Observation")."""
        return np.array([self.observe_agent(i) for i in range(self.rules.n)], np.float32)

    def observe_agent(self, i: int) -> list:
        p, n, s = self.rules, self.rules.n, self.rules.obs_scale
        me = self.agents[i]
        pending = [sum(w[2] for w in me.withdrawals if w[1] == r) for r in (0, 1)]
        v = [x / s for x in me.available + me.escrow + me.vault + pending]
        v += [me.collateral / s, me.tax_immunity / max(p.work_immunity, 1), me.utility() / s]
        v += [1.0 if k == i else 0.0 for k in range(n)]
        for k, a in enumerate(self.agents):
            v += [(a.available[0] + a.escrow[0]) / s, (a.available[1] + a.escrow[1]) / s,
                  a.collateral / s, self.reputation(k)]
        v += [self.trust[i][k] for k in range(n)]
        v += [self.trust[k][i] for k in range(n)]

        norm = max(n - 1, 1)

        def pair(x, window):
            if not x.active:
                return [0.0] * 5
            return [1.0, x.give / s, x.owed / s, float(x.resource), x.age / window]

        for k in range(n):
            v += pair(self.proposals[k][i], p.proposal_ttl)
        for k in range(n):
            v += pair(self.proposals[i][k], p.proposal_ttl)
        for k in range(n):
            v += pair(self.signals[k][i], p.signal_window)
        for k in range(n):
            v += pair(self.signals[i][k], p.signal_window)
        for j in range(n):  # open signals are public: a summary per seat, seen by every seat
            made = [sig for sig in self.signals[j] if sig.active]
            promised = [p.real(0.0), p.real(0.0)]
            for sig in made:
                promised[sig.resource] += sig.give
            received = sum(1 for k in range(n) if self.signals[k][j].active)
            v += [len(made) / norm, promised[0] / s, promised[1] / s,
                  max((sig.age for sig in made), default=0) / p.signal_window, received / norm]

        for m in range(p.obs_ledger_events):  # newest first
            if m >= len(self.ledger):
                v += [0.0] * 18
                continue
            ev = self.ledger[-1 - m]
            v += [1.0] + [1.0 if ev.kind == k else 0.0 for k in range(1, NUM_EVENT_KINDS)]
            v += [(self.step_count - ev.step) / p.max_steps, ev.actor / norm, ev.target / norm,
                  ev.amount_1 / s, ev.amount_2 / s, float(ev.resource),
                  float(ev.actor == i), float(ev.target == i)]
        v += [1.0 if self.shock_kind == k else 0.0 for k in range(NUM_SHOCK_KINDS)]
        v += [self.shock_remaining / p.shock_duration]
        v += [1.0 if me.last_error == k else 0.0 for k in range(NUM_ERROR_CODES)]
        v += [float(f) for f in me.last_outcome]
        v += [self.step_count / p.max_steps]
        return v

    # ---- export ---------------------------------------------------------------------------------
    def export_state(self) -> dict:
        """This state in `NexusState`'s field layout (nested dict of NumPy arrays, as
        `flax.serialization.to_state_dict` gives for the JAX state)."""
        p, n = self.rules, self.rules.n
        f32, i32 = np.float32, np.int32
        withdrawals = np.zeros((n, p.vault_queue_len, 2), f32)
        for i, a in enumerate(self.agents):
            for arrival, r, amount in a.withdrawals:  # a ring: slot t % Q arrives at step t
                withdrawals[i, arrival % p.vault_queue_len, r] += amount

        def table(rows, name, dtype):
            return np.array([[getattr(x, name) for x in row] for row in rows], dtype)

        size = p.ledger_size
        ring = {"step": np.zeros(size, i32), "kind": np.zeros(size, i32), "actor": np.zeros(size, i32),
                "target": np.full(size, -1, i32), "amount_1": np.zeros(size, f32),
                "amount_2": np.zeros(size, f32), "resource": np.zeros(size, i32)}
        for k, ev in enumerate(self.ledger[-size:], start=max(len(self.ledger) - size, 0)):
            for name in ring:
                ring[name][k % size] = getattr(ev, name)
        ring["head"] = np.array(len(self.ledger) % size, i32)
        ring["count"] = np.array(len(self.ledger), i32)

        return {
            "step": np.array(self.step_count, i32),
            "available": np.array([a.available for a in self.agents], f32),
            "escrow": np.array([a.escrow for a in self.agents], f32),
            "vault": np.array([a.vault for a in self.agents], f32),
            "withdrawals": withdrawals,
            "collateral": np.array([a.collateral for a in self.agents], f32),
            "tax_immunity": np.array([a.tax_immunity for a in self.agents], i32),
            "last_trade_step": np.array([a.last_trade_step for a in self.agents], i32),
            "archetype": np.array([a.archetype for a in self.agents], i32),
            "trust": np.array(self.trust, f32),
            "proposals": {name: table(self.proposals, name, dt) for name, dt in
                          (("active", bool), ("give", f32), ("want", f32), ("resource", i32), ("age", i32))},
            "signals": {name: table(self.signals, name, dt) for name, dt in
                        (("active", bool), ("give", f32), ("want", f32), ("resource", i32), ("age", i32),
                         ("shock_hit", bool), ("trust_bonus", bool), ("prepaid", bool))},
            "ledger": ring,
            "shock_kind": np.array(int(self.shock_kind), i32),
            "shock_remaining": np.array(self.shock_remaining, i32),
            "last_error": np.array([a.last_error for a in self.agents], i32),
            "last_outcome": np.array([a.last_outcome for a in self.agents], bool),
            "npc_memory": np.zeros((n, n, NPC_MEMORY_SIZE), f32),  # NPCs are not part of the core rules
            "behaviour_seat": np.arange(n, dtype=i32),  # NPC seating; dealt only with params.behaviour_shuffle
        }

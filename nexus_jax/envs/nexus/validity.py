"""Which actions are valid, and why not: one check serves the step and the action masks.

Validity is judged on the state after the expiry phase and before any other action of the
step (a snapshot), so a mask computed from the previous state's `expire` is exact, and the
outcome does not depend on the order agents are listed in. Later phases only add to an
agent's holdings before it spends, so snapshot-valid actions always execute.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from nexus_jax.envs.nexus import actions as A
from nexus_jax.envs.nexus.constants import NUM_ACTION_TYPES, ActionType as T, ErrorCode as E
from nexus_jax.envs.nexus.arith import flags_t, pick, pick_shared, small_sum
from nexus_jax.envs.nexus.trust import credit_limit, reputation


def first_error(checks: list[tuple[jnp.ndarray, E]]) -> jnp.ndarray:
    """The code of the first failing check, OK if none fails.

    A min-reduction over the stacked checks: XLA:CPU makes a reduction the root of its own
    kernel, so the verdict is computed once and read by every consumer (a mask feeds the flat
    mask and five factored heads). A select chain would be fused into, and re-evaluated by, each.
    """
    if not checks:
        return jnp.int32(E.OK)
    fails = jnp.stack(jnp.broadcast_arrays(*[c for c, _ in checks]), -1)
    first = jnp.min(jnp.where(fails, jnp.arange(len(checks), dtype=jnp.int32), len(checks)), -1)
    return pick(jnp.asarray([int(e) for _, e in checks] + [int(E.OK)], jnp.int32), first)


def check(state, params, agent: jnp.ndarray | None, action, kind: T | None = None) -> jnp.ndarray:
    """Error code of `action` (..., 5) taken by `agent` (...,) against the snapshot `state`. Broadcasts.

    `action` may also be a tuple of its five fields (type, target, amount_1, amount_2, resource),
    each broadcastable: every lookup then runs on the shape of the fields it reads (the flat
    mask's blocks: a resource's holding is looked up twice, not once per target and amount).

    `agent=None` means one action per seat, `action` (N, 5) with row i taken by agent i (the
    step): the same checks, with the per-agent lookups written as selects instead of batched
    gathers (slow on XLA:CPU under vmap).
    `kind` (static) promises that every action has that type: only its checks are built and run
    (the mask's blocks of the flat table, the NPC's candidates); the result is the same.
    """
    return _judge(state, params, agent, action, kind, first_error)


def is_valid(state, params, agent: jnp.ndarray | None, action, kind: T) -> jnp.ndarray:
    """`check(...) == ErrorCode.OK` for actions all of type `kind` (static): the same checks, and
    no failing one; where only the verdict is needed (the masks, the NPC's candidates).

    Without the first failing check's code to find, nothing is reduced: XLA fuses the verdict
    into the kernel that reads it, instead of a reduction kernel per block of candidates.
    """
    def none_fails(checks):
        return ~functools.reduce(jnp.logical_or, [c for c, _ in checks]) if checks else jnp.bool_(True)
    return _judge(state, params, agent, action, kind, none_fails, bad=jnp.bool_(False))


def _judge(state, params, agent, action, kind, combine, bad=None):
    """`check`'s body: the checks of each type (in precedence order), each type's list combined
    by `combine` (-> the first failing code, or whether none fails)."""
    n, levels = params.num_agents, params.num_levels
    types = list(T) if kind is None else [T(kind)]
    fields = tuple(action) if isinstance(action, tuple) else tuple(action[..., k] for k in range(5))
    act_kind, j, a1, a2, r = (jnp.asarray(f, jnp.int32) for f in fields)
    jc, a1c, a2c, rc = jnp.clip(j, 0, n - 1), jnp.clip(a1, 0, levels - 1), jnp.clip(a2, 0, levels - 1), jnp.clip(r, 0, 1)
    grid = params.grid()
    props, sigs = state.proposals, state.signals
    if agent is None:  # row i of `action` is agent i's
        agent = jnp.arange(n)
        give, want = pick(grid, a1c), pick(grid, a2c)
        own = lambda x: x  # noqa: E731  x[agent]
        own_res = lambda x, res: jnp.where(res == 0, x[:, 0], x[:, 1])  # noqa: E731  x[agent, res]
        named = jc[:, None] == jnp.arange(n)  # [agent, j]: the target named (exactly one per row)
        at_target = lambda x: small_sum(jnp.where(named, x, jnp.zeros((), x.dtype)), -1)  # noqa: E731  x[agent, jc], exact
        incoming_live = lambda: (named & flags_t(props.active)).any(-1)  # noqa: E731  props.active[jc, agent]
        incoming_want = lambda: at_target(props.want.T)  # noqa: E731
        incoming_res = lambda: at_target(props.resource.T)  # noqa: E731
        signal_open = lambda: (named & sigs.active).any(-1)  # noqa: E731  sigs.active[agent, jc]
        incoming_signal = lambda: (named & flags_t(sigs.active & ~sigs.prepaid)).any(-1)  # noqa: E731
        signal_want = lambda: at_target(sigs.want.T)  # noqa: E731  sigs.want[jc, agent]
        signal_res = lambda: at_target(sigs.resource.T)  # noqa: E731
    else:
        give, want = pick(grid, a1c), pick(grid, a2c)
        own = lambda x: x[agent]  # noqa: E731
        own_res = lambda x, res: jnp.where(res == 0, x[agent, 0], x[agent, 1])  # noqa: E731  x[agent, res]
        incoming_live = lambda: props.active[jc, agent]  # noqa: E731  after expiry, every active proposal is live
        incoming_want = lambda: props.want[jc, agent]  # noqa: E731
        incoming_res = lambda: props.resource[jc, agent]  # noqa: E731
        signal_open = lambda: sigs.active[agent, jc]  # noqa: E731
        incoming_signal = lambda: sigs.active[jc, agent] & ~sigs.prepaid[jc, agent]  # noqa: E731
        signal_want = lambda: sigs.want[jc, agent]  # noqa: E731
        signal_res = lambda: sigs.resource[jc, agent]  # noqa: E731

    bad_target = (j < 0) | (j >= n)
    self_target = j == agent
    bad_resource = (r < 0) | (r > 1)
    bad_amount_1 = (a1 < 0) | (a1 >= levels) | bad_resource  # VAULT/UNVAULT do not use amount_2
    bad_amounts = bad_amount_1 | (a2 < 0) | (a2 >= levels)
    targeted = [(bad_target, E.BAD_TARGET), (self_target, E.SELF_TARGET)]
    avail_r = lambda: own_res(state.available, rc)  # noqa: E731

    def checks(t: T) -> list:
        """The checks of type t, in precedence order (built only for the types asked for)."""
        if t == T.WAIT:
            return []  # always valid
        if t == T.PROPOSE:
            limit = credit_limit(own(reputation(state.trust)), params)
            return targeted + [
                (bad_amounts, E.BAD_AMOUNT),
                ((a1 == 0) & (a2 == 0), E.EMPTY_TRADE),
                (avail_r() < give, E.INSUFFICIENT_RESOURCE),
                (own(state.collateral) < params.proposal_deposit, E.INSUFFICIENT_COLLATERAL),
                (give + want > limit, E.CREDIT_LIMIT),
            ]
        if t == T.ACCEPT:
            if not params.signal_prepay:
                pay = own_res(state.available, 1 - incoming_res())
                return targeted + [(~incoming_live(), E.NO_PROPOSAL), (pay < incoming_want(), E.INSUFFICIENT_RESOURCE)]
            # With `signal_prepay` (static), ACCEPT names a partner's open, unpaid SIGNAL to me when no proposal of
            # its is live (pay its want ahead); a live proposal always takes precedence.
            live = incoming_live()
            rely = ~live & incoming_signal()
            want_, res_ = jnp.where(live, incoming_want(), signal_want()), jnp.where(live, incoming_res(), signal_res())
            pay = own_res(state.available, 1 - res_)
            return targeted + [(~live & ~rely, E.NO_PROPOSAL), (pay < want_, E.INSUFFICIENT_RESOURCE)]
        if t == T.REJECT:
            return targeted + [(~incoming_live(), E.NO_PROPOSAL)]
        if t == T.WORK:
            return [(bad_resource, E.BAD_AMOUNT), (avail_r() < params.work_cost, E.INSUFFICIENT_RESOURCE)]
        if t == T.VAULT:
            return [(bad_amount_1, E.BAD_AMOUNT), (a1 == 0, E.EMPTY_TRADE), (avail_r() < give, E.INSUFFICIENT_RESOURCE)]
        if t == T.UNVAULT:
            return [(bad_amount_1, E.BAD_AMOUNT), (a1 == 0, E.EMPTY_TRADE),
                    (own_res(state.vault, rc) < give, E.INSUFFICIENT_RESOURCE)]
        return targeted + [(bad_amounts, E.BAD_AMOUNT), ((a1 == 0) & (a2 == 0), E.EMPTY_TRADE),
                           (signal_open(), E.SIGNAL_PENDING)]  # SIGNAL

    codes = [combine(checks(t)) for t in types]
    shape = jnp.broadcast_shapes(*(f.shape for f in (act_kind, j, a1, a2, r)), jnp.shape(agent))
    if kind is not None:
        bad = jnp.int32(E.BAD_TYPE) if bad is None else bad
        return jnp.where(act_kind == kind, jnp.broadcast_to(codes[0], shape), bad)
    in_range = jnp.broadcast_to((act_kind >= 0) & (act_kind < NUM_ACTION_TYPES), shape)
    # A reduction, not a select chain: the codes are computed once per step and shared by every
    # phase that reads them (settle, commit, own actions, the outcome flags).
    by_type = pick_shared(codes, act_kind)
    return jnp.where(in_range, by_type, jnp.int32(E.BAD_TYPE))


def flat_mask(snapshot, params, agents=None) -> jnp.ndarray:
    """(len(agents), n) bool: valid flat actions of `agents` (default: all N) against the snapshot.

    The flat table lists its actions type by type, so each block is checked with only its own
    type's checks (`check(..., kind=t)`): ~8x less work than judging every row by every type.
    """
    n, levels = params.num_agents, params.num_levels
    agents = jnp.arange(n) if agents is None else jnp.asarray(agents, jnp.int32)
    blocks = []
    for t in T:
        if t == T.WAIT:  # always valid
            blocks.append(jnp.ones((agents.shape[0], 1), bool))
            continue
        fields = A.block_fields(t, n, levels)
        shape = np.broadcast_shapes(*(f.shape for f in fields))
        who = agents.reshape((-1,) + (1,) * len(shape))
        # The barrier keeps XLA from constant-folding the checks over the static fields (seconds
        # of compile time at large N, nothing saved at run time).
        fields = jax.lax.optimization_barrier(tuple(jnp.asarray(f)[None] for f in fields))
        ok = is_valid(snapshot, params, who, fields, kind=t)
        blocks.append(ok.reshape(agents.shape[0], -1))
    return jnp.concatenate(blocks, 1)


def factored_masks(flat: jnp.ndarray, params) -> dict[str, jnp.ndarray]:
    """Per-head masks of the factored view, each marginal over the heads it is not conditioned on.

    type (M, 8); target (M, 8, N) given type; resource (M, 8, 2) given type; amount_1 and
    amount_2 (M, 8, 2, L) given type and resource. A combination every head allows can
    still be jointly invalid (e.g. above the credit limit): it is then a counted no-op.
    Computed from the flat mask's type blocks by reshapes and `any` (the fields a type does
    not use are 0 in the flat table, so their marginal sits at index 0).
    """
    n, L = params.num_agents, params.num_levels
    m = flat.shape[0]
    sizes = [b.shape[0] for b in A.table_blocks(n, L)]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    heads = {"type": [], "target": [], "resource": [], "amount_1": [], "amount_2": []}
    at0 = lambda x, size: jnp.zeros(x.shape + (size,), bool).at[..., 0].set(x)  # noqa: E731  a field fixed at 0
    for t in T:
        block = flat[:, offsets[t]:offsets[t + 1]]
        if t in (T.PROPOSE, T.SIGNAL):  # (resource, target, give, want)
            b = block.reshape(m, 2, n, L, L)
            target, res = b.any((1, 3, 4)), b.any((2, 3, 4))
            a1, a2 = b.any((2, 4)), b.any((2, 3))
        elif t in (T.ACCEPT, T.REJECT):  # (target,); resource and amounts fixed at 0
            target, res = block, at0(block.any(1), 2)
            a1 = a2 = at0(at0(block.any(1), L), 2).swapaxes(1, 2)
        elif t in (T.VAULT, T.UNVAULT):  # (resource, amount); amount_2 fixed at 0
            b = block.reshape(m, 2, L)
            target, res, a1, a2 = at0(block.any(1), n), b.any(2), b, at0(b.any(2), L)
        elif t == T.WORK:  # (resource,)
            target, res, a1 = at0(block.any(1), n), block, at0(block, L)
            a2 = a1
        else:  # WAIT: every field 0
            target, res = at0(block.any(1), n), at0(block.any(1), 2)
            a1 = a2 = at0(at0(block.any(1), L), 2).swapaxes(1, 2)
        for name, x in (("type", block.any(1)), ("target", target), ("resource", res), ("amount_1", a1), ("amount_2", a2)):
            heads[name].append(x)
    return {name: jnp.stack(xs, 1) for name, xs in heads.items()}

"""Which actions are valid, and why not: one check serves the step and the action masks.

Validity is judged on the state after the expiry phase and before any other action of the
step (a snapshot), so a mask computed from the previous state's `expire` is exact, and the
outcome does not depend on the order agents are listed in. Later phases only add to an
agent's holdings before it spends, so snapshot-valid actions always execute.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from nexus_jax.envs.nexus import actions as A
from nexus_jax.envs.nexus.constants import NUM_ACTION_TYPES, ActionType as T, ErrorCode as E
from nexus_jax.envs.nexus.arith import pick, pick_shared
from nexus_jax.envs.nexus.trust import credit_limit, reputation


def _select(conds, values, default) -> jnp.ndarray:
    """`jnp.select` as a chain of `where`s, last to first (the first true condition wins).
    Same result; XLA:CPU fuses the chain, while `jnp.select` is an argmax reduction each."""
    out = jnp.asarray(default)
    for c, v in reversed(list(zip(conds, values))):
        out = jnp.where(c, v, out)
    return out


def first_error(checks: list[tuple[jnp.ndarray, E]]) -> jnp.ndarray:
    """The code of the first failing check, OK if none fails."""
    if not checks:
        return jnp.int32(E.OK)
    return _select([c for c, _ in checks], [jnp.int32(e) for _, e in checks], jnp.int32(E.OK))


def check(state, params, agent: jnp.ndarray | None, action: jnp.ndarray) -> jnp.ndarray:
    """Error code of `action` (..., 5) taken by `agent` (...,) against the snapshot `state`. Broadcasts.

    `agent=None` means one action per seat, `action` (N, 5) with row i taken by agent i (the
    step): the same checks, with the per-agent lookups written as selects instead of batched
    gathers (slow on XLA:CPU under vmap).
    """
    n, levels = params.num_agents, params.num_levels
    kind, j, a1, a2, r = (action[..., k] for k in range(5))
    jc, a1c, a2c, rc = jnp.clip(j, 0, n - 1), jnp.clip(a1, 0, levels - 1), jnp.clip(a2, 0, levels - 1), jnp.clip(r, 0, 1)
    grid = params.grid()
    props, sigs = state.proposals, state.signals
    if agent is None:  # row i of `action` is agent i's
        agent = jnp.arange(n)
        give, want = pick(grid, a1c), pick(grid, a2c)
        own = lambda x: x  # noqa: E731  x[agent]
        own_res = lambda x, res: jnp.where(res == 0, x[:, 0], x[:, 1])  # noqa: E731  x[agent, res]
        named = jc[:, None] == jnp.arange(n)  # [agent, j]: the target named (exactly one per row)
        at_target = lambda x: jnp.where(named, x, jnp.zeros((), x.dtype)).sum(-1)  # noqa: E731  x[agent, jc], exact
        incoming_live = (named & props.active.T).any(-1)  # props.active[jc, agent]
        incoming_want = at_target(props.want.T)
        incoming_res = at_target(props.resource.T)
        signal_open = (named & sigs.active).any(-1)  # sigs.active[agent, jc]
    else:
        give, want = grid[a1c], grid[a2c]
        own = lambda x: x[agent]  # noqa: E731
        own_res = lambda x, res: x[agent, res]  # noqa: E731
        incoming_live = props.active[jc, agent]  # after expiry, every active proposal is live
        incoming_want = props.want[jc, agent]
        incoming_res = props.resource[jc, agent]
        signal_open = sigs.active[agent, jc]

    bad_target = (j < 0) | (j >= n)
    self_target = j == agent
    bad_amount_1 = (a1 < 0) | (a1 >= levels) | (r < 0) | (r > 1)  # VAULT/UNVAULT do not use amount_2
    bad_amounts = bad_amount_1 | (a2 < 0) | (a2 >= levels)
    targeted = [(bad_target, E.BAD_TARGET), (self_target, E.SELF_TARGET)]
    avail_r = own_res(state.available, rc)
    rep = own(reputation(state.trust))
    incoming_pay = own_res(state.available, 1 - incoming_res)

    per_type = {
        T.WAIT: [],  # always valid
        T.PROPOSE: targeted + [
            (bad_amounts, E.BAD_AMOUNT),
            ((a1 == 0) & (a2 == 0), E.EMPTY_TRADE),
            (avail_r < give, E.INSUFFICIENT_RESOURCE),
            (own(state.collateral) < params.proposal_deposit, E.INSUFFICIENT_COLLATERAL),
            (give + want > credit_limit(rep, params), E.CREDIT_LIMIT),
        ],
        T.ACCEPT: targeted + [(~incoming_live, E.NO_PROPOSAL), (incoming_pay < incoming_want, E.INSUFFICIENT_RESOURCE)],
        T.REJECT: targeted + [(~incoming_live, E.NO_PROPOSAL)],
        T.WORK: [((r < 0) | (r > 1), E.BAD_AMOUNT), (avail_r < params.work_cost, E.INSUFFICIENT_RESOURCE)],
        T.VAULT: [(bad_amount_1, E.BAD_AMOUNT), (a1 == 0, E.EMPTY_TRADE), (avail_r < give, E.INSUFFICIENT_RESOURCE)],
        T.UNVAULT: [(bad_amount_1, E.BAD_AMOUNT), (a1 == 0, E.EMPTY_TRADE),
                    (own_res(state.vault, rc) < give, E.INSUFFICIENT_RESOURCE)],
        T.SIGNAL: targeted + [
            (bad_amounts, E.BAD_AMOUNT),
            ((a1 == 0) & (a2 == 0), E.EMPTY_TRADE),
            (signal_open, E.SIGNAL_PENDING),
        ],
    }
    codes = [first_error(per_type[t]) for t in T]
    in_range = (kind >= 0) & (kind < NUM_ACTION_TYPES)
    # A reduction, not a select chain: the codes are computed once per step and shared by every
    # phase that reads them (settle, commit, own actions, the NPC's choice, the masks).
    by_type = pick_shared(codes, kind)
    return jnp.where(in_range, by_type, jnp.int32(E.BAD_TYPE))


def flat_mask(snapshot, params, agents=None) -> jnp.ndarray:
    """(len(agents), n) bool: valid flat actions of `agents` (default: all N) against the snapshot."""
    # The barrier keeps XLA from constant-folding the per-type checks over the static table
    # (which costs seconds of compile time at large N and saves nothing at run time).
    table = jax.lax.optimization_barrier(jnp.asarray(A.action_table(params.num_agents, params.num_levels)))
    agents = jnp.arange(params.num_agents) if agents is None else jnp.asarray(agents, jnp.int32)
    return check(snapshot, params, agents[:, None], table[None]) == E.OK


def factored_masks(flat: jnp.ndarray, params) -> dict[str, jnp.ndarray]:
    """Per-head masks of the factored view, each marginal over the heads it is not conditioned on.

    type (N, 8); target (N, 8, N) given type; resource (N, 8, 2) given type; amount_1 and
    amount_2 (N, 8, 2, L) given type and resource. A combination every head allows can
    still be jointly invalid (e.g. above the credit limit): it is then a counted no-op.
    """
    table = A.action_table(params.num_agents, params.num_levels)
    n_agents, L = params.num_agents, params.num_levels
    kind, tgt, a1, a2, res = (jnp.asarray(table[:, k]) for k in range(5))

    def reduce(segment_ids, num):
        return jax.vmap(lambda m: jax.ops.segment_max(m.astype(jnp.int32), segment_ids, num) > 0)(flat)

    nt = NUM_ACTION_TYPES
    return {
        "type": reduce(kind, nt),
        "target": reduce(kind * n_agents + tgt, nt * n_agents).reshape(-1, nt, n_agents),
        "resource": reduce(kind * 2 + res, nt * 2).reshape(-1, nt, 2),
        "amount_1": reduce((kind * 2 + res) * L + a1, nt * 2 * L).reshape(-1, nt, 2, L),
        "amount_2": reduce((kind * 2 + res) * L + a2, nt * 2 * L).reshape(-1, nt, 2, L),
    }

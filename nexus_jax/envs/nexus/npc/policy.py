"""One vectorised NPC policy for every seat and archetype: score candidate actions, keep the valid best.

Each seat i considers 7N + 2 candidates: ACCEPT j, pay j's signal ahead (`signal_prepay`), REJECT j,
honour its open signal to j (PROPOSE the signalled terms), PROPOSE j (full and half size), SIGNAL j,
WORK, WAIT. Its
archetype row (npc/archetypes.py) sets which candidates it wants and how much; every
candidate is checked with `validity.check` against the same snapshot the step judges on, so
an NPC never plays an invalid action and its proposals are escrowed like anyone's.
Priorities (highest first): honour a signal it means to keep (at the first chance, or after
`npc_honour_delay` steps with the promised amount set aside meanwhile), accept, pay ahead on a
partner's signal (`signal_prepay`, on the terms it would accept), reject, signal, propose, work,
wait. Cost O(N^2) per step.
"""
from __future__ import annotations

import jax.numpy as jnp

from nexus_jax.envs.nexus.arith import flags_t, pick_shared
from nexus_jax.envs.nexus.constants import ActionType as T, Archetype
from nexus_jax.envs.nexus.dynamics import action_snapshot, resource_sums
from nexus_jax.envs.nexus.npc.archetypes import NPC_ARCHETYPES, behaviour_ids, traits
from nexus_jax.envs.nexus.npc.memory import Slot, cheater_score
from nexus_jax.envs.nexus.noise import GUMBEL_LOW, gumbel_from, split, uniforms
from nexus_jax.envs.nexus.validity import is_valid

_HONOUR, _ACCEPT, _REJECT, _SIGNAL, _PROPOSE, _WORK = 5.0, 4.0, 3.0, 2.0, 1.0, 0.5
_NEG = -1e9


def level_at_most(grid: jnp.ndarray, x: jnp.ndarray) -> jnp.ndarray:
    """Index of the largest grid amount <= x (0 when x < grid[1])."""
    return jnp.clip(jnp.sum(grid <= x[..., None] + 1e-4, -1) - 1, 0, grid.shape[0] - 1).astype(jnp.int32)


def _rows(kind, target, a1, a2, res):
    """Stack candidate fields (each (N, C)) into (N, C, 5) int32 actions."""
    return jnp.stack(jnp.broadcast_arrays(*(jnp.asarray(x, jnp.int32) for x in (kind, target, a1, a2, res))), -1)


def npc_actions(key, state, params, behaviour=None) -> jnp.ndarray:
    """(N, 5) structured actions of every seat as an NPC (the caller keeps only NPC seats' rows).

    `state` is the state before the step (what `core.step` receives); `behaviour` optionally
    overrides which archetype row drives each seat (default: the seat's archetype).
    """
    n = params.num_agents
    grid = params.grid()
    tr = traits(params, behaviour_ids(state, behaviour))
    snap = action_snapshot(state, params)
    mem = state.npc_memory
    # One threefry call for the five draws (noise.py); each is the `jax.random` draw of its key.
    u_jit, u_prop, u_sig, u_rej, u_gum = uniforms(split(key, 5), [
        ((n,), -1.0, 1.0), ((n,), 0.0, 1.0), ((n,), 0.0, 1.0), ((n, n), 0.0, 1.0), ((n, n), GUMBEL_LOW, 1.0)])

    me = jnp.arange(n)
    off = me[:, None] != me[None, :]
    intent = mem[..., Slot.INTENT]
    # A seat that delays honouring keeps what it promised (and one step's upkeep of it) aside until then:
    # every other candidate is sized and checked against what is left (`free`), the honour against all it holds.
    s = snap.signals
    kept = s.active & (intent >= 0) & (tr.honour_delay[:, None] > 0)
    promised = resource_sums(jnp.where(kept, s.give, 0.0), s.resource, 1)  # (N, 2)
    upkeep = jnp.broadcast_to(jnp.asarray(params.upkeep, jnp.float32), (n, 2))
    free = snap.replace(available=snap.available - promised - jnp.where(promised > 0, upkeep, 0.0))
    avail = free.available  # (N, 2)
    poor = jnp.argmin(avail, 1)
    rich = 1 - poor
    avail_rich = jnp.take_along_axis(avail, rich[:, None], 1)[:, 0]
    avail_poor = jnp.take_along_axis(avail, poor[:, None], 1)[:, 0]

    cheat = cheater_score(mem, tr.fm_discount, params)  # (N, N) [me, partner]
    last = mem[..., Slot.LAST]
    bond = mem[..., Slot.BOND]
    shunned = ((tr.mirror[:, None] > 0) & (last < 0)) | (tr.cheat_sensitivity[:, None] * cheat > params.npc_cheat_tolerance)

    # ---- ACCEPT / REJECT the live proposal from j (proposals table is [proposer, target]) ----
    p = snap.proposals
    inc = flags_t(p.active)  # [me, j]
    threshold = tr.accept_min_give + tr.accept_jitter * u_jit
    trusted = snap.trust >= tr.min_trust[:, None]  # [me, j]: a partner I still deal with
    # Trust sets the size of a deal (`npc_trust_volume` > 0): give + want with j at most that x T[me, j]; the
    # volume, not npc_offer_size, then sizes my proposals.
    capped = tr.trust_volume[:, None] > 0
    volume_cap = tr.trust_volume[:, None] * snap.trust  # [me, j]

    def terms_wanted(g, w, r, offered):
        """[me, j]: would I take `g` of `r` for `w` of the other from j (offered where `offered`)? And the appeal."""
        log_ratio = jnp.log(jnp.maximum(g, 1e-3)) - jnp.log(jnp.maximum(w, 1e-3))
        appeal = log_ratio + tr.mirror[:, None] * last - tr.cheat_sensitivity[:, None] * cheat
        wants = (g >= threshold[:, None]) & (appeal >= jnp.log(tr.accept_min_ratio)[:, None])
        low_on_offered = jnp.take_along_axis(avail, r, 1) < params.npc_low_level  # avail[me, r[me, j]]
        fair_enough = g >= params.npc_accept_floor * w  # no NPC accepts below the floor, however low it is
        # By need: accept only a trade that leaves my utility (min of what I hold) no lower.
        mine_r = jnp.take_along_axis(avail, r, 1)  # [me, j]: what I hold of the offered resource
        mine_o = jnp.take_along_axis(avail, 1 - r, 1)  # ... and of the one I would pay with
        no_loss = jnp.minimum(mine_r + g, mine_o - w) >= jnp.minimum(mine_r, mine_o)
        fair_enough = fair_enough & ((params.npc_offer_by_need == 0) | no_loss)
        in_volume = ~capped | (g + w <= volume_cap + 1e-4)
        low = (tr.accept_when_low[:, None] > 0) & low_on_offered
        return offered & trusted & fair_enough & in_volume & (wants | low), appeal

    wants, appeal = terms_wanted(p.give.T, p.want.T, p.resource.T, inc)
    rejects = inc & ~wants & (u_rej < tr.reject_rate[:, None])
    accept_score = jnp.where(wants, _ACCEPT + 0.1 * jnp.tanh(appeal), _NEG)
    reject_score = jnp.where(rejects, _REJECT, _NEG)
    # Reliance (`signal_prepay`, static): pay ahead on j's open signal to me, with no proposal of j's live, on the
    # terms a proposal would need (a partner whose breaks I hold against it has a lower appeal), below a live proposal.
    if params.signal_prepay:
        s_in = flags_t(s.active & ~s.prepaid) & ~inc  # [me, j]
        relies, rely_appeal = terms_wanted(s.give.T, s.want.T, s.resource.T, s_in)
        rely_score = jnp.where(relies, _ACCEPT - 0.5 + 0.1 * jnp.tanh(rely_appeal), _NEG)

    # ---- honour my open signal to j with exactly the signalled terms: once older than the delay (age >= 1
    # here, after expiry), or sooner when the next upkeep would leave it short of what it promised ----
    short_soon = jnp.take_along_axis(avail, s.resource, 1) < 0  # [me, j]: nothing left beyond the reserve
    honour = s.active & (intent >= 0) & ((s.age > tr.honour_delay[:, None]) | short_soon)
    honour_score = jnp.where(honour, _HONOUR, _NEG)
    hg, hw = level_at_most(grid, s.give), level_at_most(grid, s.want)

    # ---- partner preference for new proposals and signals ----
    liquid_j_poor = (snap.available + snap.escrow)[None, :, :]  # [-, j, res]
    holds_what_i_lack = jnp.take_along_axis(jnp.broadcast_to(liquid_j_poor, (n, n, 2)),
                                            jnp.broadcast_to(poor[:, None, None], (n, n, 1)), 2)[..., 0]
    gumbel = gumbel_from(u_gum)
    pref = (tr.trust_weight[:, None] * snap.trust + tr.bond_weight[:, None] * jnp.tanh(bond)
            + tr.mirror[:, None] * last - tr.cheat_sensitivity[:, None] * cheat
            + tr.need_weight[:, None] * holds_what_i_lack / params.obs_scale + tr.noise[:, None] * gumbel)
    busy = p.active | s.active  # something pending to j already (or a signal I mean to break)
    eligible = off & ~shunned & ~busy & trusted
    pref_score = 0.01 * jnp.tanh(pref)

    give_amt = jnp.minimum(tr.offer_size, 0.5 * avail_rich)
    give_any = 0.5 * avail_rich  # with a trust volume, the volume sizes my proposals instead of npc_offer_size
    # By need (`npc_offer_by_need`): offer at most half the surplus of the rich resource over the poor one and ask
    # in proportion, so a proposal never costs the proposer utility; else the archetype's fixed terms (v0).
    by_need = params.npc_offer_by_need > 0
    surplus = jnp.maximum(0.5 * (avail_rich - avail_poor), 0.0)
    give_amt, give_any = (jnp.where(by_need, jnp.minimum(x, surplus), x) for x in (give_amt, give_any))
    # [me, j]: the same amount to every partner, or the most the volume my trust in j allows (give + want at the
    # offered ratio: give x (1 + 1 / ratio)).
    give_pair = jnp.where(capped, jnp.minimum(give_any[:, None], volume_cap / (1.0 + 1.0 / tr.offer_ratio[:, None])),
                          give_amt[:, None])
    pg = level_at_most(grid, give_pair)  # [me, j]
    pw = level_at_most(grid, jnp.where(by_need | capped, grid[pg], tr.offer_size[:, None]) / tr.offer_ratio[:, None])
    signal_want = level_at_most(grid, jnp.where(by_need, grid[level_at_most(grid, give_amt)], tr.offer_size)
                                / tr.offer_ratio)  # (N,): a signal's terms do not depend on trust
    pg_half, pw_half = jnp.maximum(pg - 1, 0), jnp.maximum(pw - 1, 0)
    go_propose = u_prop < tr.propose_rate
    propose_score = jnp.where(eligible & go_propose[:, None] & (pg > 0), _PROPOSE + pref_score, _NEG)
    half_score = jnp.where(eligible & go_propose[:, None] & (pg_half > 0), _PROPOSE - 0.1 + pref_score, _NEG)

    sg = level_at_most(grid, jnp.minimum(tr.offer_size * tr.signal_generosity, tr.signal_cap * avail_rich))
    go_signal = u_sig < tr.signal_rate
    signal_score = jnp.where(eligible & go_signal[:, None] & (sg[:, None] > 0), _SIGNAL + pref_score, _NEG)

    # ---- WORK when short of one resource and rich in the other ----
    work = (avail_poor < 0.5 * params.npc_low_level) & (avail_rich >= params.npc_low_level)
    work_score = jnp.where(work, _WORK, _NEG)

    j = jnp.broadcast_to(me[None, :], (n, n))
    z = jnp.zeros((n, n), jnp.int32)
    rb = jnp.broadcast_to(rich[:, None], (n, n))
    blocks = [  # (type, candidates (N, C, 5), scores (N, C), snapshot checked against); each block is checked
        # with its type's checks only
        (T.ACCEPT, _rows(T.ACCEPT, j, z, z, z), accept_score, free),
        *([(T.ACCEPT, _rows(T.ACCEPT, j, z, z, z), rely_score, free)] if params.signal_prepay else []),
        (T.REJECT, _rows(T.REJECT, j, z, z, z), reject_score, free),
        (T.PROPOSE, _rows(T.PROPOSE, j, hg, hw, s.resource), honour_score, snap),
        (T.PROPOSE, _rows(T.PROPOSE, j, pg, pw, rb), propose_score, free),
        (T.PROPOSE, _rows(T.PROPOSE, j, pg_half, pw_half, rb), half_score, free),
        (T.SIGNAL, _rows(T.SIGNAL, j, sg[:, None], signal_want[:, None], rb), signal_score, free),
        (T.WORK, _rows(T.WORK, 0, 0, 0, rich[:, None]), work_score[:, None], free),
    ]
    # The best valid candidate of each block, then the best block (the first of equal scores wins,
    # as one argmax over the concatenated candidates would). Reducing block by block keeps each
    # block's checks in its own kernel: fused into one argmax over a concatenate, XLA:CPU
    # evaluated every block's expression for every candidate.
    best_score, best_action = [jnp.zeros(n)], [_rows(T.WAIT, 0, 0, 0, jnp.zeros(n))]  # WAIT: always valid, score 0
    for t, cands, score, view in blocks:
        score = jnp.where(is_valid(view, params, me[:, None], cands, kind=t), score, _NEG)
        c = jnp.argmax(score, 1)
        best_score.append(jnp.take_along_axis(score, c[:, None], 1)[:, 0])
        best_action.append(jnp.take_along_axis(cands, c[:, None, None], 1)[:, 0])
    order = [*range(1, len(best_score)), 0]  # block order as listed, WAIT last
    pick_block = jnp.argmax(jnp.stack([best_score[i] for i in order], 1), 1)
    return pick_shared([best_action[i] for i in order], pick_block[:, None])


def archetype_heuristic(archetype: int):
    """Every seat played by `archetype`'s NPC policy (the seats keep their economy): a heuristic in
    `EnvSpec`'s signature, `(key, state, params) -> (N, 5)` structured actions."""

    def heuristic(key, state, params):
        return npc_actions(key, state, params, jnp.full_like(state.archetype, int(archetype)))

    heuristic.__doc__ = f"Every seat plays the {Archetype(archetype).name} NPC policy (`npc_actions`)."
    return heuristic


HEURISTICS = {Archetype(a).name.lower(): archetype_heuristic(a) for a in NPC_ARCHETYPES}  # with npc.scripted's baselines:
# NexusEnv's `spec.heuristics`

"""Advantage alignment: an opponent-shaping term on PPO's advantages for populations of learners.

Independent learners in a social dilemma drift to mutual defection: each seat's gradient sees only its
own return. Advantage alignment (Duque et al., "Advantage Alignment Algorithms", ICLR 2025) adds to
seat i's advantage at step t a term that pushes the seat toward actions that raise the others'
advantages when its own past went well, and away from them when it went badly (reciprocity):

    A*_i(t) = A_i(t) + beta * gamma * P_i(t) * O_i(t),
    P_i(t)  = sum_{k<t in the episode} gamma^(t-k) Â_i(k)       (own past advantages, reset at episode starts)
    O_i(t)  = mean over the other learner seats j of Â_j(t)                 (scope "all")
            = mean over the seats j that i's action addressed at t, or whose action addressed i, of
              Â_j(t) - mean_k Â_k(t)      (scope "partner"; 0 at a step with no such seat)

where Â is the advantage divided by its batch standard deviation (so beta is scale-free), and the
term is put back in advantage units. Only the policy's advantages change; the value targets stay GAE's.
With one learner seat there is no other seat to align with, and `check_alignment` refuses it.

Scope "all" is the paper's sum over opponents, as a mean. In a large population most of the others'
advantages at step t have nothing to do with seat i's action, so their mean is mostly noise (with 15
others, the one partner an action touched weighs 1/15); scope "partner" keeps only the seats the step's
actions connect (`LearnerEnv.partners`: the seat a PROPOSE/ACCEPT/REJECT/SIGNAL names). There the
partner's advantage is taken relative to the step's mean over all seats: advantages share an episode's luck
(a shock, a critic that cannot see it), so P_i and a raw Â_j correlate, and since only actions that name a seat
get the term, that correlation alone would favour naming a seat, whatever the action does for the partner.

Centering removes the luck every seat shares, not what a seat can see: an action that names a partner chosen for
its high advantage (a seat a local shock missed, one the critic undervalues) still earns the term. `align_types`
(the `types` of `LearnerEnv.partners`) keeps only the named action types as links, so the actions that name a seat at
no cost can be left out: at 64 seats SIGNAL grew to 39% of the actions under all four types, and PROPOSE to 46%
with SIGNAL left out (docs/design.md, "Opponent shaping in self-play").

Scope "answered" links an action to the partner it affects at the step the effect lands, one partner per action
(`EnvSpec.offers`: Nexus's PROPOSE, answered by ACCEPT or REJECT):
    an answer at t (j ACCEPTs or REJECTs i's offer):  O_j(t) = Â_i(t) - mean_k Â_k(t)
    an offer at t (i PROPOSEs to j), answered by j at the first later step t' of the episode and chunk at which j
    answers i:                                         O_i(t) = Â_j(t') - mean_k Â_k(t')
    anything else, or an offer not answered in the chunk: 0.
So an offer earns the term only through what its answer did for the partner, and sending offers earns nothing by
itself. Types, not the state, decide what answers what: an answer is credited to i's latest offer to j before it.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp


SCOPES = ("all", "partner", "answered")


def check_alignment(beta: float, num_learners: int) -> None:
    """`align_beta > 0` needs at least two learner seats (self-play); ValueError naming it otherwise."""
    if beta > 0 and num_learners < 2:
        raise ValueError(f"align_beta={beta} needs an env with at least two learner seats (self-play), "
                         f"this one has {num_learners}")


def others_mean(unit: jnp.ndarray, partners: jnp.ndarray | None) -> jnp.ndarray:
    """O_i(t): (T, E, A) -> (T, E, A), the mean of the other seats' advantages; with `partners` ((T, E, A) int,
    the learner seat each seat's action addressed, -1 none) only over the seats connected to i at t, each
    relative to the step's mean over all seats."""
    n = unit.shape[-1]
    if partners is None:
        return (unit.sum(-1, keepdims=True) - unit) / (n - 1)
    addressed = partners[..., :, None] == jnp.arange(n)  # [i, j]: i's action names j
    linked = (addressed | jnp.swapaxes(addressed, -1, -2)) & ~jnp.eye(n, dtype=bool)
    w = linked.astype(unit.dtype)
    relative = unit - unit.mean(-1, keepdims=True)
    return (w * relative[..., None, :]).sum(-1) / jnp.maximum(w.sum(-1), 1.0)


def answered_others(unit: jnp.ndarray, offers: jnp.ndarray, answers: jnp.ndarray, done: jnp.ndarray) -> jnp.ndarray:
    """O_i(t) of scope "answered": (T, E, A) unit advantages, `offers` (T, E, A) the learner seat each seat's offer
    names (-1: no offer), `answers` (T, E, A) the learner seat whose offer each seat's answer names (-1: none),
    dones -> (T, E, A). A backward scan carries, per env and pair [i, j], j's relative advantage at the next step at
    which j answers i; an offer takes it (and uses it up)."""
    n = unit.shape[-1]
    relative = unit - unit.mean(-1, keepdims=True)
    direct = jnp.where(answers >= 0, jnp.take_along_axis(relative, jnp.maximum(answers, 0), -1), 0.0)

    def body(carry, x):
        pending, has = carry  # (E, A, A) [i, j]: j's relative advantage when it next answers i, and whether it does
        rel, off, ans, d = x
        fresh = ~d.any(-1)[:, None, None]  # the episode ended at this step: later answers are the next episode's
        pending, has = jnp.where(fresh, pending, 0.0), has & fresh
        to = (off[..., :, None] == jnp.arange(n)) & (off >= 0)[..., None]  # [i, j]: i offers to j now
        delayed = jnp.where(to & has, pending, 0.0).sum(-1)  # at most one j per i
        has = has & ~to
        answered = ((ans[..., :, None] == jnp.arange(n)) & (ans >= 0)[..., None]).swapaxes(-1, -2)  # [i, j]: j answers i
        pending = jnp.where(answered, rel[..., None, :], pending)
        return (pending, has | answered), delayed

    e = unit.shape[1]
    init = (jnp.zeros((e, n, n), unit.dtype), jnp.zeros((e, n, n), bool))
    _, delayed = jax.lax.scan(body, init, (relative, offers, answers, done), reverse=True)
    return direct + delayed


def align_advantages(adv: jnp.ndarray, done: jnp.ndarray, gamma: float, beta: float,
                     partners: jnp.ndarray | None = None, answered: tuple | None = None) -> jnp.ndarray:
    """(T, E, A) advantages and dones (time-major, A learner seats) -> the aligned advantages, same shape.

    `done[t]` ends the episode at step t, so step t+1 starts with no past. A rollout chunk also starts
    with no past (the sum does not carry across updates). `partners` (T, E, A): scope "partner"
    (`others_mean`); `answered` (offers, answers), each (T, E, A): scope "answered" (`answered_others`); neither:
    scope "all".
    """
    scale = adv.std() + 1e-8
    unit = adv / scale
    others = others_mean(unit, partners) if answered is None else answered_others(unit, *answered, done)

    def body(past, x):
        a, d = x
        out = past
        past = gamma * (past + a) * (1.0 - d.astype(adv.dtype))
        return past, out

    _, past = jax.lax.scan(body, jnp.zeros_like(unit[0]), (unit, done))
    return adv + beta * gamma * past * others * scale

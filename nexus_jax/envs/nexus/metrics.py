"""SPEC 3 episode metrics, accumulated step by step from `info` (pure): `NexusEnv.episode_metrics`, which the
evaluator (`nexus_jax.rollout.evaluate`) and `LogWrapper` read.

Every per-agent metric covers all N seats (learners and NPCs), indexed by seat.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from nexus_jax.envs.nexus.observation import utility


@struct.dataclass
class EpisodeAcc:
    """Running totals of the current episode."""

    returns: jax.Array  # (N,)
    length: jax.Array  # ()
    util_start: jax.Array  # () system utility at reset
    util_end: jax.Array  # ()
    util_peak: jax.Array  # ()
    trades: jax.Array  # (N,) trades the seat was party to
    trade_volume: jax.Array  # (N,) give + want of those trades
    proposals: jax.Array  # (N,) proposals made
    accepted: jax.Array  # (N,) of those, accepted
    invalid: jax.Array  # (N,)
    signals_made: jax.Array  # (N,)
    signals_honoured: jax.Array  # (N,)
    signals_broken: jax.Array  # (N,) all breaks, force majeure included
    force_majeure: jax.Array  # (N,) breaks marked FORCE_MAJEURE
    shocks: jax.Array  # () shocks started
    shock_steps: jax.Array  # () steps ending with a shock active
    resilient: jax.Array  # (N,) of those, steps with U_i above the threshold
    starving: jax.Array  # (N,)
    trust_sum: jax.Array  # () sum over steps of the mean off-diagonal trust
    utility_end: jax.Array  # (N,) per-seat utility at the last step
    # shock attribution: after partner j breaks a signal to i, a window of `window` steps
    window_left: jax.Array  # (N, N) int [i, j]
    window_fm: jax.Array  # (N, N) bool: the open window followed a force-majeure break
    after_fm_trades: jax.Array  # (N,) trades of i with j inside force-majeure windows
    after_fm_steps: jax.Array  # (N,) pair-steps inside force-majeure windows
    after_mal_trades: jax.Array  # (N,) the same after malicious breaks
    after_mal_steps: jax.Array  # (N,)


def init_acc(state) -> EpisodeAcc:
    n = state.available.shape[0]
    zf, zn = jnp.zeros(()), jnp.zeros((n,))
    u0 = utility(state).sum()
    return EpisodeAcc(
        returns=zn, length=jnp.zeros((), jnp.int32), util_start=u0, util_end=u0, util_peak=u0,
        trades=zn, trade_volume=zn, proposals=zn, accepted=zn, invalid=zn, signals_made=zn, signals_honoured=zn,
        signals_broken=zn, force_majeure=zn, shocks=zf, shock_steps=zf, resilient=zn, starving=zn, trust_sum=zf,
        utility_end=utility(state), window_left=jnp.zeros((n, n), jnp.int32), window_fm=jnp.zeros((n, n), bool),
        after_fm_trades=zn, after_fm_steps=zn, after_mal_trades=zn, after_mal_steps=zn,
    )


def accumulate(acc: EpisodeAcc, prev_state, info, params, window: int = 10) -> EpisodeAcc:
    """Add one step. `prev_state` is the state the step started from; `info` is core.step's (+ rewards_all)."""
    st = info["stats"]
    n = acc.returns.shape[0]
    u = info["utility"]
    trades = st["trades"]
    traded = trades | trades.T
    off = ~jnp.eye(n, dtype=bool)
    shock_active = info.get("shock_active", st["shock_started"])

    live = acc.window_left > 0
    fm_w, mal_w = live & acc.window_fm, live & ~acc.window_fm
    broken = st["signals_broken"].T  # [target i, signaller j]
    fm = st["broken_force_majeure"].T
    left = jnp.where(broken, window, jnp.maximum(acc.window_left - 1, 0))

    f = lambda x: x.astype(jnp.float32)  # noqa: E731
    return acc.replace(
        returns=acc.returns + info["rewards_all"],
        length=acc.length + 1,
        util_end=u.sum(),
        util_peak=jnp.maximum(acc.util_peak, u.sum()),
        trades=acc.trades + f(traded).sum(1),
        trade_volume=acc.trade_volume + st["trade_volume"].sum(1) + st["trade_volume"].sum(0),
        proposals=acc.proposals + f(st["proposals"]).sum(1),
        accepted=acc.accepted + f(trades).sum(1),
        invalid=acc.invalid + f(info["invalid"]),
        signals_made=acc.signals_made + f(st["signals_made"]).sum(1),
        signals_honoured=acc.signals_honoured + f(st["signals_honoured"]).sum(1),
        signals_broken=acc.signals_broken + f(st["signals_broken"]).sum(1),
        force_majeure=acc.force_majeure + f(st["broken_force_majeure"] & st["signals_broken"]).sum(1),
        shocks=acc.shocks + f(st["shock_started"]),
        shock_steps=acc.shock_steps + f(shock_active),
        resilient=acc.resilient + f(shock_active & (u > params.resilience_threshold)),
        starving=acc.starving + f(st["starving"]),
        trust_sum=acc.trust_sum + jnp.where(off, prev_state.trust, 0.0).sum() / (n * (n - 1)),
        utility_end=u,
        window_left=left,
        window_fm=jnp.where(broken, fm, acc.window_fm),
        after_fm_trades=acc.after_fm_trades + f(fm_w & traded).sum(1),
        after_fm_steps=acc.after_fm_steps + f(fm_w).sum(1),
        after_mal_trades=acc.after_mal_trades + f(mal_w & traded).sum(1),
        after_mal_steps=acc.after_mal_steps + f(mal_w).sum(1),
    )


def gini(x: jnp.ndarray) -> jnp.ndarray:
    """Gini coefficient of non-negative values (0: equal; 0 when all are zero)."""
    total = x.sum()
    diff = jnp.abs(x[:, None] - x[None, :]).sum()
    return jnp.where(total > 0, diff / (2 * x.shape[0] * jnp.where(total > 0, total, 1.0)), 0.0)


def summarize(acc: EpisodeAcc) -> dict:
    """The SPEC 3 metrics of an episode (per-seat arrays are (N,))."""
    rate = lambda a, b: a / jnp.maximum(b, 1.0)  # noqa: E731
    steps = jnp.maximum(acc.length, 1).astype(jnp.float32)
    fm_rate = rate(acc.after_fm_trades, acc.after_fm_steps)
    mal_rate = rate(acc.after_mal_trades, acc.after_mal_steps)
    return {
        "returns": acc.returns,
        "lengths": acc.length,
        "system_utility_start": acc.util_start,
        "system_utility_end": acc.util_end,
        "system_utility_peak": acc.util_peak,
        "trades_completed": acc.accepted.sum(),
        "trades": acc.trades,
        "trade_volume": acc.trade_volume.sum() / 2.0,
        "proposals": acc.proposals,
        "proposal_acceptance_rate": rate(acc.accepted, acc.proposals),
        "invalid_action_rate": acc.invalid / steps,
        "signals_made": acc.signals_made,
        "signals_honoured": acc.signals_honoured,
        "signals_broken": acc.signals_broken,
        "force_majeure_breaks": acc.force_majeure,
        "shocks": acc.shocks,
        "shock_resilience": rate(acc.resilient, acc.shock_steps),
        "gini_utility": gini(jnp.maximum(acc.utility_end, 0.0)),
        "starving_steps": acc.starving,
        "mean_trust": acc.trust_sum / steps,
        "final_utility": acc.utility_end,
        # shock attribution: i's trade rate with a partner in the window after its break
        "trade_rate_after_force_majeure": fm_rate,
        "trade_rate_after_malicious": mal_rate,
        "attribution_windows_force_majeure": acc.after_fm_steps,
        "attribution_windows_malicious": acc.after_mal_steps,
        "attribution_gap": jnp.where((acc.after_fm_steps > 0) & (acc.after_mal_steps > 0), fm_rate - mal_rate, 0.0),
    }

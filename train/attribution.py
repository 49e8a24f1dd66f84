"""Shock-vs-malice attribution with a control for what the shock did to the partner (docs/research.md, result 3).

The raw gap (nexus_jax.wrappers.metrics; seat 0's trade rate with partner j in the 10 steps after
j's force-majeure break minus after its malicious break) confounds the learner's judgement with
the partner's capacity: a force-majeure break means a shock just took most of what j held, so j
trades less whoever the learner is. A history-blind policy has a raw gap of about -0.10 in
`nexus-research-v0` (docs/research.md).

The controlled gap is a difference in differences on the learner's own choice:
- cooperation = seat 0 PROPOSEs to j that step, or pays j's open signal ahead (`signal_prepay`)
  (its decision alone; a trade also needs j's consent and goods);
- every pair-step (0, j) is in a force-majeure window, a malicious window, or neither (the
  baseline), and in a stratum: partner j x bin of j's smaller liquid holding x bin of its larger
  one, at the start of the step (what the shock changed, and what the learner sees); with
  `signal_prepay`, x whether j has an unpaid signal open to seat 0 (the chance to pay ahead: a
  CHEATER signals again right after its break, so without this a blind policy pays ahead more
  in malicious windows);
- gap = mean over force-majeure pair-steps of (proposed - baseline rate of its stratum) minus
  the same over malicious pair-steps. Strata without baseline pair-steps are left out (the
  coverage says how much). A policy that ignores history scores ~0; one that forgives
  force majeure and punishes malice (the RECIPROCATOR) scores > 0 (tests/test_attribution.py).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

MIN_EDGES = (5.0, 15.0, 30.0, 60.0)  # bins of j's smaller liquid holding (its utility)
MAX_EDGES = (20.0, 40.0, 80.0)  # bins of j's larger liquid holding
BINS = (len(MIN_EDGES) + 1) * (len(MAX_EDGES) + 1)
FM, MAL, BASE = 0, 1, 2  # window kinds: rows of the counts
HISTORY_TERMS = ("npc_trust_weight", "npc_bond_weight", "npc_mirror", "npc_cheat_sensitivity", "npc_min_trust")


def history_blind(params, archetype: int = 0):
    """`params` whose `archetype` row (default LEARNER) ignores history: no trust, bond, mirror or cheater
    terms, so the heuristic picks partners by what they hold now (need) and chance, and judges offers by
    their terms. The validation policy of the controlled gap (its gap must be ~0)."""
    return params.replace(**{f: jnp.asarray(getattr(params, f)).at[archetype].set(0.0) for f in HISTORY_TERMS})


def num_strata(num_agents: int) -> int:
    """Strata per env: partner x holding bins, twice (without, then with, a signal to pay ahead open)."""
    return 2 * num_agents * BINS


def step_counts(acc, state, info, reliance, seat: int = 0) -> jnp.ndarray:
    """One env, one step -> (3, strata, 2) [window kind, stratum, (pair-steps, cooperations of `seat`)].

    `acc` is the metrics accumulator *before* this step (its open windows, as
    `metrics.accumulate` reads them), `state` the state the step started from, `info` the step's;
    `reliance` (a Python bool: the static `params.signal_prepay`) whether the rules let seat 0 pay a
    signal ahead: only then are the pair-steps split by whether it could (without it the second half
    of the strata stays empty, and the gap is the one measured before the rule existed).
    """
    n = acc.window_left.shape[0]
    live = acc.window_left[seat] > 0  # [j]: a window after j's break to `seat` is open
    other = jnp.arange(n) != seat
    kinds = jnp.stack([live & acc.window_fm[seat], live & ~acc.window_fm[seat], ~live & other]).astype(jnp.float32)
    liquid = state.available + state.escrow
    lo = jnp.digitize(liquid.min(-1), jnp.asarray(MIN_EDGES))
    hi = jnp.digitize(liquid.max(-1), jnp.asarray(MAX_EDGES))
    sig = state.signals
    can_rely = reliance & sig.active[:, seat] & ~sig.prepaid[:, seat]  # [j]
    stratum = jnp.arange(n) * BINS + lo * (len(MAX_EDGES) + 1) + hi + can_rely * (n * BINS)
    onehot = jax.nn.one_hot(stratum, 2 * n * BINS)  # (N, S)
    st = info["stats"]
    # [j]: seat proposed to j, or paid j's signal ahead (`signal_prepay`; none without the rule)
    proposed = (st["proposals"][seat] | st["relied"][:, seat]).astype(jnp.float32)
    steps = kinds @ onehot  # (3, S)
    props = (kinds * proposed[None, :]) @ onehot
    return jnp.stack([steps, props], -1)


def _gap(c: np.ndarray) -> tuple[float, float, float, float, float]:
    """Pooled (3, S, 2) counts -> (gap, fm - base, mal - base, fm coverage, mal coverage)."""
    steps, props = c[..., 0], c[..., 1]
    base = props[BASE] / np.maximum(steps[BASE], 1.0)
    have = steps[BASE] > 0
    out = []
    for k in (FM, MAL):
        n = (steps[k] * have).sum()
        out.append(((props[k] - steps[k] * base) * have).sum() / n if n > 0 else np.nan)
        out.append(n / steps[k].sum() if steps[k].sum() > 0 else np.nan)
    d_fm, cov_fm, d_mal, cov_mal = out
    return d_fm - d_mal, d_fm, d_mal, cov_fm, cov_mal


def by_policy(counts) -> np.ndarray:
    """(P, E, 3, S, 2) counts of P policies (seeds) -> (P * E, 3, P * S, 2): each policy's strata its own,
    so pooling compares every policy with its own baseline (pooled strata would mix one policy's windows
    with another's baseline)."""
    c = np.asarray(counts, np.float64)
    p, e, k, s, two = c.shape
    out = np.zeros((p, e, k, p, s, two))
    out[np.arange(p), :, :, np.arange(p)] = c
    return out.reshape(p * e, k, p * s, two)


def controlled_gap(counts, boot: int = 1000, seed: int = 0) -> dict:
    """Per-episode counts (E, 3, S, 2) of one policy (several: `by_policy` first) -> the controlled gap,
    its two arms, their coverage and an episode-bootstrap 95% CI."""
    c = np.asarray(counts, np.float64)
    c = c.reshape((-1,) + c.shape[-3:])
    gap, d_fm, d_mal, cov_fm, cov_mal = _gap(c.sum(0))
    rng = np.random.default_rng(seed)
    bs = np.array([_gap(c[rng.integers(0, len(c), len(c))].sum(0))[0] for _ in range(boot)])
    bs = bs[np.isfinite(bs)]
    ci = [float(np.percentile(bs, 2.5)), float(np.percentile(bs, 97.5))] if len(bs) else [np.nan, np.nan]
    return {"gap": float(gap), "ci_gap": ci, "fm_minus_base": float(d_fm), "mal_minus_base": float(d_mal),
            "coverage": [float(cov_fm), float(cov_mal)],
            "pair_steps": [float(c[:, FM, :, 0].sum()), float(c[:, MAL, :, 0].sum()), float(c[:, BASE, :, 0].sum())]}

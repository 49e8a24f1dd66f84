"""Evaluation suite: held-out scenarios, cross-play with ratings, self-play snapshot curves, shock attribution.

Everything runs through one episode runner, `make_runner`, over the Nexus functional core
with every seat's *source* given per cell as data:

  kind HEURISTIC (arg = archetype id): the jitted NPC policy of that archetype plays the seat
      (the NPC `behaviour` override; the seat keeps its own archetype's economy);
  kind POLICY (arg = index into a bank of stacked Flax params): a trained policy;
  kind RANDOM: a uniformly random valid choice per factored head.

A *cell* is one (N,) row of kinds and args; a batch of `chunk` cells x `episodes` episodes
is one call of one compiled program (the env params are a traced argument), so every
scenario with the same static shape (number of seats) and every cross-play or snapshot
cell reuse one compilation. Every cell of a call plays the same episode keys (common
random numbers), which the paired win rates of the cross-play ratings rely on.

Pure host-side statistics live here too (`mean_ci`, `bradley_terry`, `elo_from_strengths`,
`pairwise_wins`, `snapshot_curve`, `attribution_rates`) so tests can check them on hand
data without compiling anything.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from nexus_jax.cli import UserInputError
from train.stats import mean_ci

HEURISTIC, POLICY, RANDOM = 0, 1, 2

# ---- scenarios as data ----------------------------------------------------------------------
# name -> env id + param overrides (NexusParams fields) + what it tests. Training uses nexus-v0
# with default shocks; everything except "train-like" is held out (never used in training).
SCENARIOS: dict[str, dict] = {
    "train-like": {"env_id": "nexus-v0", "overrides": {},
                   "note": "the training distribution (BULLY, ALTRUIST, TIT_FOR_TAT; default shocks)"},
    "shock-storm": {"env_id": "nexus-v0", "overrides": {"shock_storm_factor": 4.0, "shock_duration": 2},
                    "note": "correlated shock storms: start probability x4 right after a shock, 2-step shocks"},
    "harsh-shocks": {"env_id": "nexus-v0",
                     "overrides": {"shock_severity": 0.4, "shock_max_fraction": 0.8, "p_grid_failure": 0.2},
                     "note": "harsher severity (40% base loss, cap 80%) and twice the grid-failure rate"},
    "reciprocators": {"env_id": "nexus-reciprocator-v0", "overrides": {},
                      "note": "unseen mix: RECIPROCATOR, RECIPROCATOR, TIT_FOR_TAT"},
    "cheater-mix": {"env_id": "nexus-cheater-v0", "overrides": {},
                    "note": "unseen mix: CHEATER, RECIPROCATOR, ALTRUIST"},
    "cheater-storm": {"env_id": "nexus-cheater-v0",
                      "overrides": {"shock_storm_factor": 3.0, "shock_severity": 0.35, "p_solar_flare": 0.1},
                      "note": "CHEATER, RECIPROCATOR, ALTRUIST under storms: both malicious and force-majeure "
                              "breaks happen (the attribution study)"},
    "8-seats": {"env_id": "nexus-8-v0", "overrides": {},
                "note": "8 seats (default mix repeated); a flat-obs policy plays only if trained at N=8 (obs size), "
                        "an entity-network policy at any N"},
    "16-seats": {"env_id": "nexus-16-v0", "overrides": {},
                 "note": "16 seats; a flat-obs policy plays only if trained at N=16 (obs size), an entity-network policy "
                         "at any N"},
}
ATTRIBUTION_SCENARIO = "cheater-storm"


def scenario_params(name: str, scenarios: dict | None = None):
    """-> (NexusParams, learner seats) of a scenario."""
    import nexus_jax

    sc = (scenarios or SCENARIOS)[name]
    env = nexus_jax.make(sc["env_id"], **sc["overrides"])
    return env.default_params, env.learner_seats


# ---- statistics (host side, numpy) ----------------------------------------------------------

def t_ci(x) -> tuple[float, float]:
    """Mean and 95% half-width with Student's t (for a handful of seeds)."""
    x = np.asarray(x, np.float64).reshape(-1)
    if len(x) < 2:
        return float(x.mean()), 0.0
    from scipy import stats

    return float(x.mean()), float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))


def pairwise_wins(returns: np.ndarray) -> np.ndarray:
    """returns (K, K, E): seat-0 return of policy a against opponents b on shared episode keys.

    -> W (K, K): W[a, b] = number of episodes where a facing b did better than b facing a
    (the same keys, the same seat), ties counting half. The diagonal is 0.
    """
    r = np.asarray(returns, np.float64)
    diff = r - r.transpose(1, 0, 2)
    w = (diff > 0).sum(-1) + 0.5 * (diff == 0).sum(-1)
    np.fill_diagonal(w, 0.0)
    return w


def row_wins(returns: np.ndarray) -> np.ndarray:
    """returns (K, K, E) as in `pairwise_wins` -> W (K, K): W[a, c] = number of (column b, episode) pairs where
    a in seat 0 did better than c in seat 0 against the *same* opponents b on the same key (ties half)."""
    r = np.asarray(returns, np.float64)
    diff = r[:, None] - r[None, :]  # (a, c, b, e)
    w = (diff > 0).sum((-1, -2)) + 0.5 * (diff == 0).sum((-1, -2))
    np.fill_diagonal(w, 0.0)
    return w


def bradley_terry(wins: np.ndarray, prior: float = 0.0, iters: int = 2000, tol: float = 1e-12) -> np.ndarray:
    """Bradley-Terry strengths p (geometric mean 1) from a win-count matrix by Hunter's MM updates.

    P(a beats b) = p_a / (p_a + p_b). `prior` adds that many virtual draws (half a win each
    way) to every pair, which keeps strengths finite when a policy wins every game.
    """
    w = np.asarray(wins, np.float64).copy()
    k = w.shape[0]
    if prior:
        w = w + prior / 2.0 * (1.0 - np.eye(k))
    n = w + w.T  # games per pair
    total_wins = w.sum(1)
    p = np.ones(k)
    for _ in range(iters):
        denom = (n / (p[:, None] + p[None, :])).sum(1)
        new = np.where(denom > 0, total_wins / np.maximum(denom, 1e-300), p)
        new = np.maximum(new, 1e-300)
        new = new / np.exp(np.mean(np.log(new)))
        if np.max(np.abs(new - p)) < tol:
            p = new
            break
        p = new
    return p


def elo_from_strengths(p: np.ndarray, base: float = 1000.0) -> np.ndarray:
    """Elo scale: 400 log10 p, shifted so the mean rating is `base` (a 400-point gap = 10:1 odds)."""
    e = 400.0 * np.log10(np.asarray(p, np.float64))
    return e - e.mean() + base


def elo_ratings(returns: np.ndarray, prior: float = 1.0) -> np.ndarray:
    """Elo of each policy from the (K, K, E) cross-play returns (paired wins -> Bradley-Terry)."""
    return elo_from_strengths(bradley_terry(pairwise_wins(returns), prior=prior))


def snapshot_curve(returns: np.ndarray) -> dict:
    """"Am I getting better": snapshots 0..S-1 in training order, returns (S, S, E) as in cross-play.

    For each snapshot j >= 1: `vs_past_return` = mean over past i < j of its mean seat-0
    return against i; `vs_past_gain` = mean over i < j of (return of j facing i - return of i
    facing j) on the same keys; `vs_past_winrate` = share of paired episodes j beat i
    (ties half). Snapshot 0 has no past: NaN.
    """
    r = np.asarray(returns, np.float64)
    s = r.shape[0]
    m = r.mean(-1)
    w = pairwise_wins(r) / r.shape[-1]
    ret, gain, win = [np.nan], [np.nan], [np.nan]
    for j in range(1, s):
        ret.append(float(m[j, :j].mean()))
        gain.append(float((m[j, :j] - m[:j, j]).mean()))
        win.append(float(w[j, :j].mean()))
    return {"vs_past_return": ret, "vs_past_gain": gain, "vs_past_winrate": win, "self_play_return": m.diagonal().tolist()}


def attribution_rates(fm_trades, fm_steps, mal_trades, mal_steps, boot: int = 1000, seed: int = 0) -> dict:
    """Pooled trade rates with a partner inside the windows after its force-majeure vs malicious breaks.

    Inputs are per-episode counts (E,) of the learner seat (metrics.py: after_*_trades and
    after_*_steps). rate = sum(trades) / sum(pair-steps); 95% CIs by an episode bootstrap.
    """
    a = [np.asarray(x, np.float64).reshape(-1) for x in (fm_trades, fm_steps, mal_trades, mal_steps)]
    fm_t, fm_s, mal_t, mal_s = a

    def rates(idx):
        f = fm_t[idx].sum() / fm_s[idx].sum() if fm_s[idx].sum() > 0 else np.nan
        m = mal_t[idx].sum() / mal_s[idx].sum() if mal_s[idx].sum() > 0 else np.nan
        return f, m

    full = np.arange(len(fm_t))
    f, m = rates(full)
    rng = np.random.default_rng(seed)
    bs = np.array([rates(rng.integers(0, len(fm_t), len(fm_t))) for _ in range(boot)]) if len(fm_t) > 1 else \
        np.full((1, 2), np.nan)
    gap = bs[:, 0] - bs[:, 1]

    def ci(x):
        x = x[np.isfinite(x)]
        return [float(np.percentile(x, 2.5)), float(np.percentile(x, 97.5))] if len(x) else [np.nan, np.nan]

    return {"rate_fm": float(f), "rate_mal": float(m), "gap": float(f - m),
            "ci_fm": ci(bs[:, 0]), "ci_mal": ci(bs[:, 1]), "ci_gap": ci(gap),
            "fm_pair_steps": float(fm_s.sum()), "mal_pair_steps": float(mal_s.sum()),
            "episodes_with_fm": int((fm_s > 0).sum()), "episodes_with_mal": int((mal_s > 0).sum())}


# ---- the episode runner (jitted) -------------------------------------------------------------

class CellOutput(NamedTuple):
    """One call's outputs; leading axes (C cells, E episodes)."""

    returns: object  # (C, E, N) every seat's episode return
    summary: dict  # metrics.summarize of each episode, leaves (C, E, ...)
    trade_matrix: object  # (C, E, N, N) trade volume [proposer, acceptor] summed over the episode
    trace_trust: object  # (C, T, N, N) trust through episode 0
    trace_utility: object  # (C, T, N) utility through episode 0
    trace_shock: object  # (C, T) shock kind active after each step of episode 0 (0 none)


def make_runner(num_agents: int, num_steps: int, episodes: int, policy=None, chunk: int = 8,
                policy_seats: tuple | None = None):
    """-> jitted `run(params, kinds (chunk, N), args (chunk, N), bank, key) -> CellOutput`.

    `policy` is an `ActorCritic` trained with one learner seat on `num_agents` seats (its
    input is the seat's obs plus the agent-id one-hot of size 1); `bank` its params stacked
    on a leading axis (any pytree when `policy` is None). The policy runs for every seat of
    every cell (masked out where the seat's kind is not POLICY), with the params of the
    seat's bank entry gathered once per (cell, seat). A policy with `seat_obs` (the entity
    network) reads each seat's entity view of the state instead of the flat obs, at any N.

    `policy_seats` (static; None: every seat): the only seats that may be POLICY or RANDOM;
    masks and the policy are computed for those alone (at N=64, seat 0 alone is 1/64 of the
    work). `Suite.run_cells` refuses cells that put a policy elsewhere.
    """
    import jax
    import jax.numpy as jnp

    from nexus_jax.envs.nexus import actions as A
    from nexus_jax.envs.nexus import core
    from nexus_jax.envs.nexus.env import action_snapshot
    from nexus_jax.envs.nexus.npc import npc_actions
    from nexus_jax.envs.nexus.npc.memory import update_npc_memory
    from nexus_jax.envs.nexus.validity import factored_masks, flat_mask
    from nexus_jax.wrappers.metrics import accumulate, init_acc, summarize
    from train.envs import random_actions

    n = num_agents

    def seat_actions(params, kinds, args, bank, key, obs, state):
        """(E, N, 5) actions of every seat of one cell."""
        k_npc, k_pol, k_rnd = jax.random.split(key, 3)
        base = getattr(params, "behaviours", None)  # the scenario's NPC behaviour per seat (default: archetypes)
        behaviour = jnp.where(kinds == HEURISTIC, args, params.archetypes if base is None else base)
        heur = jax.vmap(lambda k, s: npc_actions(k, s, params, behaviour))(jax.random.split(k_npc, episodes), state)
        if policy is None:
            return heur, behaviour
        seats = jnp.arange(n) if policy_seats is None else jnp.asarray(policy_seats, jnp.int32)
        s_n = seats.shape[0]
        flat = jax.vmap(lambda s: flat_mask(action_snapshot(s, params), params, seats))(state)  # (E, S, n_flat)
        fmasks = jax.vmap(lambda f: factored_masks(f, params))(flat)  # leaves (E, S, ...)
        rnd = random_actions(k_rnd, fmasks, "factored")  # (E, S, 5)

        def one_seat(si, k):
            i = seats[si]
            p = jax.tree.map(lambda x: x[jnp.clip(args[i], 0, x.shape[0] - 1)], bank)
            if hasattr(policy, "seat_obs"):
                o = jax.tree.map(lambda x: x[:, None], jax.vmap(lambda s: policy.seat_obs(s, params, i))(state))
            else:
                o = obs[:, i][:, None]
            m = (flat[:, si][:, None] if policy.action_head == "flat"
                 else jax.tree.map(lambda x: x[:, si][:, None], fmasks))
            a = policy.act(p, o, m, k)[0][:, 0]
            return A.decode(a, n, params.num_levels) if policy.action_head == "flat" else a

        pol = jax.vmap(one_seat, out_axes=1)(jnp.arange(s_n), jax.random.split(k_pol, s_n))  # (E, S, 5)
        if policy_seats is not None:  # seats outside policy_seats are never POLICY or RANDOM (run_cells checks)
            pol, rnd = heur.at[:, seats].set(pol), heur.at[:, seats].set(rnd)
        k = kinds[None, :, None]
        acts = jnp.where(k == POLICY, pol, jnp.where(k == RANDOM, rnd, heur))
        return acts.astype(jnp.int32), behaviour

    def cell(params, kinds, args, bank, key):
        k_reset, k_run = jax.random.split(key)
        obs, state = jax.vmap(lambda k: core.reset(k, params))(jax.random.split(k_reset, episodes))
        acc = jax.vmap(init_acc)(state)
        tm = jnp.zeros((episodes, n, n))

        def step(carry, k):
            obs, state, acc, tm = carry
            k_act, k_mem, k_step = jax.random.split(k, 3)
            acts, behaviour = seat_actions(params, kinds, args, bank, k_act, obs, state)

            def env_step(kk_mem, kk_step, s, a):
                o, new, rew, _, info = core.step(kk_step, s, a, params)
                new = new.replace(npc_memory=update_npc_memory(s, new, info, params, kk_mem, behaviour))
                return o, new, {**info, "rewards_all": rew, "shock_active": new.shock_remaining > 0}

            obs2, state2, info = jax.vmap(env_step)(jax.random.split(k_mem, episodes),
                                                   jax.random.split(k_step, episodes), state, acts)
            acc = jax.vmap(lambda a, s, i: accumulate(a, s, i, params))(acc, state, info)
            tm = tm + info["stats"]["trade_volume"]
            trace = (state2.trust[0], info["utility"][0], jnp.where(state2.shock_remaining[0] > 0,
                                                                     state2.shock_kind[0], 0))
            return (obs2, state2, acc, tm), trace

        (_, _, acc, tm), (tr_trust, tr_util, tr_shock) = jax.lax.scan(
            step, (obs, state, acc, tm), jax.random.split(k_run, num_steps))
        summ = jax.vmap(summarize)(acc)
        return CellOutput(summ["returns"], summ, tm, tr_trust, tr_util, tr_shock)

    def run(params, kinds, args, bank, key):
        return jax.vmap(cell, in_axes=(None, 0, 0, None, None))(params, kinds, args, bank, key)

    return jax.jit(run)


class Suite:
    """Runs cells through cached compiled runners (one per number of seats), `chunk` cells per call."""

    def __init__(self, policy=None, bank=None, policy_agents: int | None = None, episodes: int = 32,
                 chunk: int = 8, seed: int = 0, policy_seats: tuple | None = None):
        self.policy, self.bank, self.policy_agents = policy, bank, policy_agents
        self.episodes, self.chunk, self.seed = episodes, chunk, seed
        self.policy_seats = None if policy_seats is None else tuple(int(i) for i in policy_seats)
        self._runners: dict = {}

    def fits(self, num_agents: int) -> bool:
        """Can the policy play at this number of seats? A flat-obs policy only at its training N; an
        entity-view policy (one with `seat_obs`) at any N."""
        if self.policy is None:
            return False
        return num_agents == self.policy_agents or hasattr(self.policy, "seat_obs")

    def runner(self, num_agents: int, num_steps: int):
        key = (num_agents, num_steps, self.fits(num_agents))
        if key not in self._runners:
            self._runners[key] = make_runner(num_agents, num_steps, self.episodes,
                                             self.policy if self.fits(num_agents) else None, self.chunk,
                                             self.policy_seats)
        return self._runners[key]

    def run_cells(self, params, cells: list[tuple[list[int], list[int]]], seed: int | None = None) -> dict:
        """cells: [(kinds (N,), args (N,))] -> dict of numpy arrays with a leading cell axis."""
        import jax
        import jax.numpy as jnp

        n = params.num_agents
        if self.policy_seats is not None:
            for kinds, _ in cells:
                bad = [i for i, k in enumerate(kinds) if k in (POLICY, RANDOM) and i not in self.policy_seats]
                if bad:
                    raise ValueError(f"Suite(policy_seats={self.policy_seats}): a cell puts a policy or random "
                                     f"player in seat(s) {bad}")
        steps = int(np.asarray(params.max_steps))
        run = self.runner(n, steps)
        bank = self.bank if self.fits(n) else jnp.zeros((1,))
        key = jax.random.PRNGKey(self.seed if seed is None else seed)
        outs = []
        for start in range(0, len(cells), self.chunk):
            part = cells[start:start + self.chunk]
            pad = part + [part[-1]] * (self.chunk - len(part))
            kinds = jnp.asarray([c[0] for c in pad], jnp.int32)
            args = jnp.asarray([c[1] for c in pad], jnp.int32)
            out = jax.device_get(run(params, kinds, args, bank, key))
            outs.append(jax.tree.map(lambda x: np.asarray(x)[:len(part)], out))
        return jax.tree.map(lambda *xs: np.concatenate(xs, 0), *outs)


def seat0_cells(params, candidates: list[tuple[str, int, int]]) -> list:
    """One cell per candidate (name, kind, arg) in seat 0; every other seat its scenario's NPC behaviour."""
    base = getattr(params, "behaviours", None)
    arch = [int(a) for a in np.asarray(params.archetypes if base is None else base)]
    return [([kind] + [HEURISTIC] * (len(arch) - 1), [arg] + arch[1:]) for _, kind, arg in candidates]


def versus_cells(params, rows: list[tuple[str, int, int]], cols: list[tuple[str, int, int]]) -> list:
    """Cross-play cells: row policy in seat 0, the column policy in every other seat (seats keep their economy)."""
    n = params.num_agents
    return [([rk] + [ck] * (n - 1), [ra] + [ca] * (n - 1)) for _, rk, ra in rows for _, ck, ca in cols]


# ---- studies over a run folder ----------------------------------------------------------------

HEURISTIC_NAMES = ("bully", "altruist", "tit_for_tat", "reciprocator", "cheater")  # archetype ids 1..5
CROSSPLAY_HEURISTICS = ("altruist", "tit_for_tat", "reciprocator", "cheater")


def heuristic_candidates(names=HEURISTIC_NAMES) -> list[tuple[str, int, int]]:
    from nexus_jax.envs.nexus.constants import Archetype

    return [(nm, HEURISTIC, int(Archetype[nm.upper()])) for nm in names]


class Bank(NamedTuple):
    names: list  # entry names, in bank order
    params: object  # pytree, leaves stacked (K, ...)
    seeds: list  # bank indices of each seed's final params
    snapshots: dict  # seed -> [(update, env_steps, bank index)] in training order


def load_bank(run_dirs) -> tuple:
    """-> (cfg, policy, Bank) of one or more run folders (same network shape); names are prefixed by run."""
    import jax

    from train.checkpoint import load_run, param_shapes
    from train.snapshots import load_policies

    run_dirs = [run_dirs] if isinstance(run_dirs, (str, bytes)) or hasattr(run_dirs, "parts") else list(run_dirs)
    names, params, seeds, snaps = [], [], [], {}
    cfg0 = policy0 = None
    for r, run_dir in enumerate(run_dirs):
        cfg, env, policy, kept = load_run(run_dir)
        if policy.num_learners != 1 and not hasattr(policy, "seat_obs"):  # an entity policy plays any one seat
            raise UserInputError(f"{run_dir}: the suite plays single-learner policies (got {policy.num_learners} learner "
                             f"seats, e.g. a nexus-selfplay-v0 run); see docs/evaluation.md")
        if cfg0 is None:
            cfg0, policy0 = cfg, policy
        pre = "" if len(run_dirs) == 1 else f"{cfg.name}/"
        pol = load_policies(run_dir, param_shapes(cfg, env, policy))
        if not pol["seeds"]:  # a run from before seeds/ existed: its kept checkpoint stands for seed 0
            pol["seeds"] = [kept]
        for s, p in enumerate(pol["seeds"]):
            seeds.append(len(names))
            names.append(f"{pre}seed{s}")
            params.append(p)
        for s, u, steps, p in pol["snapshots"]:
            snaps.setdefault(f"{pre}seed{s}", []).append((u, steps, len(names)))
            names.append(f"{pre}seed{s}@u{u}")
            params.append(p)
    stacked = jax.tree.map(lambda *xs: np.stack(xs), *params)
    return cfg0, policy0, Bank(names, stacked, seeds, snaps)


def make_suite(cfg, policy, bank: Bank, episodes: int = 32, chunk: int = 8, seed: int = 0,
               policy_seats: tuple | None = None) -> Suite:
    import nexus_jax

    n = nexus_jax.make(cfg.env_id, **cfg.env).default_params.num_agents
    return Suite(policy, bank.params, n, episodes, chunk, seed, policy_seats)


def _policy_cand(bank: Bank, i: int) -> tuple[str, int, int]:
    return (bank.names[i], POLICY, i)


def run_scenarios(suite: Suite, bank: Bank, names=None, scenarios: dict | None = None,
                  log=None) -> tuple[dict, dict]:
    """Every candidate in seat 0 of each scenario -> ({scenario: {candidate: stats}}, raw outputs)."""
    import time

    scenarios = scenarios or SCENARIOS
    table, raw = {}, {}
    for name in names or list(scenarios):
        t0 = time.time()
        params, _ = scenario_params(name, scenarios)
        cands = []
        if suite.fits(params.num_agents):
            cands += [_policy_cand(bank, i) for i in bank.seeds] + [("random", RANDOM, 0)]
        cands += heuristic_candidates()
        out = suite.run_cells(params, seat0_cells(params, cands))
        rows = {}
        for c, (cn, kind, _) in enumerate(cands):
            rows[cn] = _seat0_stats(out, c)
        if len(bank.seeds) > 1 and suite.fits(params.num_agents):
            rows["trained (all seeds)"] = _seat0_stats(out, [i for i, c in enumerate(cands) if c[1] == POLICY])
        table[name] = {"env_id": scenarios[name]["env_id"], "overrides": scenarios[name]["overrides"],
                       "note": scenarios[name]["note"], "num_agents": params.num_agents,
                       "policy_fits": suite.fits(params.num_agents), "rows": rows}
        raw[name] = {"candidates": [c[0] for c in cands], "out": out}
        if log is not None:
            log(f"  scenario {name}: {len(cands)} candidates, {time.time() - t0:.0f} s")
    return table, raw


def _seat0_stats(out, cells) -> dict:
    cells = np.atleast_1d(cells)
    s = out.summary
    pick = lambda x: np.asarray(x)[cells].reshape((-1,) + np.asarray(x).shape[2:])  # noqa: E731
    ret = pick(out.returns)[:, 0]
    m, ci = mean_ci(ret)
    stats = {"mean": m, "ci95": ci, "n": int(len(ret))}
    for key, col in (("trades", "trades"), ("invalid_rate", "invalid_action_rate"), ("final_utility", "final_utility"),
                     ("signals_broken", "signals_broken")):
        stats[key] = float(pick(s[col])[:, 0].mean())
    stats["system_utility_end"] = float(pick(s["system_utility_end"]).mean())
    stats["shocks"] = float(pick(s["shocks"]).mean())
    return stats


def format_scenarios(table: dict) -> str:
    lines = []
    for name, sc in table.items():
        over = ", ".join(f"{k}={v}" for k, v in sc["overrides"].items()) or "defaults"
        lines.append(f"\n[{name}] {sc['env_id']} ({over}), N={sc['num_agents']}: {sc['note']}")
        if not sc["policy_fits"]:
            lines.append("  (trained policies not evaluated here: their input size is fixed by the training N)")
        lines.append(f"  {'policy in seat 0':<22}{'mean return':>12}{'± 95% CI':>10}{'trades':>8}{'invalid':>9}"
                     f"{'sys U end':>11}")
        for cn, r in sc["rows"].items():
            lines.append(f"  {cn:<22}{r['mean']:>12.2f}{r['ci95']:>10.2f}{r['trades']:>8.1f}{r['invalid_rate']:>9.3f}"
                         f"{r['system_utility_end']:>11.1f}")
    return "\n".join(lines)


def crossplay_candidates(bank: Bank, heuristics=CROSSPLAY_HEURISTICS, early_snapshot: bool = True) -> list:
    """Trained seeds, the first seed's untrained (update 0) snapshot, random, and heuristic archetypes."""
    cands = [_policy_cand(bank, i) for i in bank.seeds]
    if early_snapshot and bank.snapshots:
        first = next(iter(bank.snapshots.values()))
        cands.append(_policy_cand(bank, first[0][2]))
    return cands + [("random", RANDOM, 0)] + heuristic_candidates(heuristics)


def run_crossplay(suite: Suite, cands: list, scenario: str = "train-like", scenarios: dict | None = None) -> dict:
    """Row policy in seat 0 vs the column policy in every other seat -> returns (K, K, E), Elo."""
    params, _ = scenario_params(scenario, scenarios)
    out = suite.run_cells(params, versus_cells(params, cands, cands))
    k = len(cands)
    ret = np.asarray(out.returns)[:, :, 0].reshape(k, k, -1)
    return {"scenario": scenario, "names": [c[0] for c in cands], "mean": ret.mean(-1).tolist(),
            "ci95": [[mean_ci(ret[a, b])[1] for b in range(k)] for a in range(k)],
            **crossplay_ratings(ret), "episodes": int(ret.shape[-1]), "_returns": ret}


def crossplay_ratings(ret: np.ndarray) -> dict:
    """Two Elo ratings from (K, K, E) cross-play returns (see docs/evaluation.md):
    `elo`: head-to-head, a-facing-b vs b-facing-a on the same key (who gains more from the pairing);
    `elo_same_opponents`: a vs c in seat 0 against the same column b on the same key (who plays seat 0 better)."""
    wins = pairwise_wins(ret)
    return {"winrate": (wins / ret.shape[-1]).tolist(),
            "elo": elo_from_strengths(bradley_terry(wins, prior=1.0)).tolist(),
            "elo_same_opponents": elo_from_strengths(bradley_terry(row_wins(ret), prior=1.0)).tolist()}


def run_snapshot_curves(suite: Suite, bank: Bank, scenario: str = "train-like", max_snapshots: int = 6,
                        scenarios: dict | None = None) -> dict:
    """Per seed: every snapshot against every other (cross-play among snapshots) -> snapshot_curve."""
    params, _ = scenario_params(scenario, scenarios)
    res = {}
    for seed_name, snaps in bank.snapshots.items():
        if len(snaps) > max_snapshots:  # keep the first and last, evenly spaced between
            keep = np.unique(np.round(np.linspace(0, len(snaps) - 1, max_snapshots)).astype(int))
            snaps = [snaps[i] for i in keep]
        cands = [_policy_cand(bank, idx) for _, _, idx in snaps]
        out = suite.run_cells(params, versus_cells(params, cands, cands))
        k = len(cands)
        ret = np.asarray(out.returns)[:, :, 0].reshape(k, k, -1)
        res[seed_name] = {"updates": [u for u, _, _ in snaps], "env_steps": [s for _, s, _ in snaps],
                          **snapshot_curve(ret), "mean": ret.mean(-1).tolist()}
    return res


def attribution_from(raw_scenario: dict) -> dict:
    """Seat 0's trade rate with a partner after its force-majeure vs malicious breaks, per candidate."""
    out, res = raw_scenario["out"], {}
    s = out.summary
    for c, name in enumerate(raw_scenario["candidates"]):
        fm_s = np.asarray(s["attribution_windows_force_majeure"])[c, :, 0]
        mal_s = np.asarray(s["attribution_windows_malicious"])[c, :, 0]
        fm_t = np.round(np.asarray(s["trade_rate_after_force_majeure"])[c, :, 0] * np.maximum(fm_s, 1))
        mal_t = np.round(np.asarray(s["trade_rate_after_malicious"])[c, :, 0] * np.maximum(mal_s, 1))
        res[name] = attribution_rates(fm_t, fm_s, mal_t, mal_s)
    return res


# ---- CLI glue (python -m train.evaluate RUN_DIR --suite ...) -----------------------------------

def _jsonable(x):
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items() if not str(k).startswith("_")}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.floating, float)):
        return None if not np.isfinite(x) else float(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    return x


def run_suite(run_dir, parts=("scenarios", "crossplay", "snapshots", "attribution"), scenario_names=None,
              episodes: int = 32, seed: int = 0, extra_runs=(), chunk: int = 8, scenarios: dict | None = None,
              log=lambda *a: print(*a, flush=True)) -> tuple[dict, dict]:
    """Run the asked suite parts on a run folder -> (results (JSON-able), arrays for the report)."""
    import time
    from pathlib import Path

    cfg, policy, bank = load_bank([Path(run_dir)] + [Path(r) for r in extra_runs])
    suite = make_suite(cfg, policy, bank, episodes, chunk, seed)
    scenarios = scenarios or SCENARIOS
    results = {"run_dir": str(run_dir), "episodes": episodes, "seed": seed, "bank": bank.names}
    arrays = {}
    t0 = time.time()
    if "scenarios" in parts or "attribution" in parts:
        names = list(scenario_names or scenarios)
        if "attribution" in parts and ATTRIBUTION_SCENARIO in scenarios and ATTRIBUTION_SCENARIO not in names:
            names.append(ATTRIBUTION_SCENARIO)
        table, raw = run_scenarios(suite, bank, names, scenarios, log)
        if "scenarios" in parts:
            results["scenarios"] = table
            log(format_scenarios(table))
        first = next((n for n in names if table[n]["policy_fits"]), None)
        if first is not None:
            o, c = raw[first]["out"], 0
            arrays.update(trace_scenario=first, trace_policy=raw[first]["candidates"][c],
                          trace_trust=o.trace_trust[c], trace_utility=o.trace_utility[c],
                          trace_shock=o.trace_shock[c], trade_matrix=o.trade_matrix[c].mean(0),
                          trace_archetypes=np.asarray(scenario_params(first, scenarios)[0].archetypes))
        if "attribution" in parts and ATTRIBUTION_SCENARIO in raw:
            # free for every scenario (the windows are counted in every episode); the study's own is cheater-storm
            by = {n: attribution_from(raw[n]) for n in raw}
            by = {n: rows for n, rows in by.items()
                  if any(r["fm_pair_steps"] > 0 and r["mal_pair_steps"] > 0 for r in rows.values())}
            results["attribution"] = {"scenario": ATTRIBUTION_SCENARIO, "rows": by[ATTRIBUTION_SCENARIO]
                                      if ATTRIBUTION_SCENARIO in by else attribution_from(raw[ATTRIBUTION_SCENARIO]),
                                      "by_scenario": by}
            for n, rows in by.items():
                log(format_attribution(rows, n))
        log(f"[scenarios] {time.time() - t0:.0f} s")
    if "crossplay" in parts:
        t1 = time.time()
        cp = run_crossplay(suite, crossplay_candidates(bank), scenarios=scenarios)
        arrays["crossplay_returns"] = cp["_returns"]
        results["crossplay"] = cp
        log(format_crossplay(cp))
        log(f"[crossplay] {time.time() - t1:.0f} s")
    if "snapshots" in parts:
        t1 = time.time()
        results["snapshots"] = run_snapshot_curves(suite, bank, scenarios=scenarios)
        log(format_snapshots(results["snapshots"]))
        log(f"[snapshots] {time.time() - t1:.0f} s")
    results["wall_s"] = round(time.time() - t0, 1)
    return _jsonable(results), arrays


def format_crossplay(cp: dict) -> str:
    names = cp["names"]
    w = max(len(n) for n in names) + 2
    lines = [f"\nCross-play ({cp['scenario']}, {cp['episodes']} episodes per cell): mean return of the row policy in "
             f"seat 0 with the column policy in every other seat", " " * w + "".join(f"{n[:9]:>10}" for n in names)]
    for a, n in enumerate(names):
        lines.append(f"{n:<{w}}" + "".join(f"{v:>10.1f}" for v in cp["mean"][a]))
    lines.append("Elo head-to-head (a facing b vs b facing a, same keys; Bradley-Terry, mean 1000): " +
                 ", ".join(f"{n} {e:.0f}" for n, e in sorted(zip(names, cp["elo"]), key=lambda t: -t[1])))
    lines.append("Elo same opponents (a vs c in seat 0 against the same column, same keys): " +
                 ", ".join(f"{n} {e:.0f}" for n, e in sorted(zip(names, cp["elo_same_opponents"]),
                                                             key=lambda t: -t[1])))
    return "\n".join(lines)


def format_snapshots(res: dict) -> str:
    lines = ["\nSnapshots vs their past (mean over earlier snapshots; seat-0 return, paired gain, win rate):"]
    for seed, r in res.items():
        for j, u in enumerate(r["updates"]):
            if j == 0:
                lines.append(f"  {seed} update {u:>5}: (no past)  self-play return {r['self_play_return'][0]:.2f}")
            else:
                lines.append(f"  {seed} update {u:>5}: return {r['vs_past_return'][j]:7.2f}  gain "
                             f"{r['vs_past_gain'][j]:+6.2f}  win rate {r['vs_past_winrate'][j]:.2f}")
    return "\n".join(lines)


def format_attribution(att: dict, scenario: str = ATTRIBUTION_SCENARIO) -> str:
    lines = [f"\nShock attribution ({scenario}): seat 0's trades per partner-step in the 10 steps after "
             f"that partner broke a signal to it", f"  {'policy in seat 0':<22}{'after FM':>10}{'after malicious':>17}"
             f"{'gap (95% CI)':>24}{'FM / mal pair-steps':>22}"]
    for name, r in att.items():
        f = lambda x: "n/a" if x is None or not np.isfinite(x) else f"{x:.3f}"  # noqa: E731
        gap = f"{f(r['gap'])} [{f(r['ci_gap'][0])}, {f(r['ci_gap'][1])}]"
        lines.append(f"  {name:<22}{f(r['rate_fm']):>10}{f(r['rate_mal']):>17}{gap:>24}"
                     f"{int(r['fm_pair_steps']):>11} / {int(r['mal_pair_steps'])}")
    return "\n".join(lines)


def merge_results(old: dict, new: dict) -> dict:
    """A partial suite run updates suite.json: scenario tables merge per scenario, other parts are replaced,
    and `commands` keeps every command that contributed."""
    out = {**old, **new}
    if "scenarios" in old and "scenarios" in new:
        out["scenarios"] = {**old["scenarios"], **new["scenarios"]}
    out["commands"] = old.get("commands", [old["command"]] if "command" in old else []) + [new.get("command", "?")]
    return out


def run_suite_cli(args) -> int:
    import json
    from pathlib import Path

    parts = set()
    if args.suite:
        parts = {"scenarios", "crossplay", "snapshots", "attribution"}
    if args.scenarios is not None:
        parts.add("scenarios")
    for p in ("crossplay", "snapshots", "attribution"):
        if getattr(args, p):
            parts.add(p)
    unknown = [n for n in (args.scenarios or []) if n not in SCENARIOS]
    if unknown:
        raise UserInputError(f"unknown scenario(s) {unknown}; known: {list(SCENARIOS)}")
    import shlex
    import sys

    results, arrays = run_suite(args.run_dir, tuple(parts), args.scenarios or None, args.episodes or 32,
                                args.seed or 0, args.runs)
    results["command"] = "python -m train.evaluate " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    run = Path(args.run_dir)
    path = run / "suite.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    merged = merge_results(old, results)
    path.write_text(json.dumps(merged, indent=1))
    arr_path = run / "suite_arrays.npz"
    old_arrays = dict(np.load(arr_path)) if arr_path.exists() else {}
    np.savez(arr_path, **{**old_arrays, **{k: np.asarray(v) for k, v in arrays.items()}})
    print(f"\nwrote {path} and {run / 'suite_arrays.npz'} ({results['wall_s']} s)")
    return 0

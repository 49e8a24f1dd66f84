"""Turn user overrides into validated CrisisParams: bad values fail here, naming the field.

Every field is checked for kind, shape, finiteness and range (`nexus_jax.base.fields`) before
any array is made, then the rules between fields (a task the cluster can never run, a
dependency cycle, an episode that is not a whole number of steps, a reward that would
overflow float32 within an episode).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp
import numpy as np

from nexus_jax.base.fields import Field, FieldError, INT32_MAX, check, finite_bound, static_int
from nexus_jax.envs.crisis.constants import NUM_CRISIS_KINDS, NUM_LEVELS
from nexus_jax.envs.crisis.tasks import default_task_arrays, empty_task_arrays

_FAIL = FieldError("CrisisParams")
_fail = _FAIL.value
MAX_SLOTS = 4096  # num_agents * max_tasks: the (slots, slots) dependency matrix stays under 16M entries
# The shape-giving fields (max_tasks also: num_agents * max_tasks <= MAX_SLOTS).
_STATIC = {"num_agents": Field("int", (), lo=2, hi=64), "max_tasks": Field("int", (), lo=1, hi=MAX_SLOTS // 2),
           "max_crises": Field("int", (), lo=1, hi=1024), "dependency_features": Field("bool", ())}
_TASK_FIELDS = ("task_exists", "task_urgent", "task_cores", "task_ram", "task_gpu",
                "task_duration_min", "task_deadline_h", "task_deps")
_CRISIS_FIELDS = ("crisis_kind", "crisis_start_h", "crisis_duration_h", "crisis_magnitude", "crisis_level")
_MODES = {"task_source": 1, "crisis_source": 1, "team_reward_mode": 1, "curriculum_level": NUM_LEVELS - 1}
_INT_MIN = {"negotiation_min_level": 0, "contract_ttl": 1}
_UNIT = {"gen_task_prob", "gen_gpu_prob", "gen_gpu_prob_last", "gen_chain_prob", "gen_cross_dep_prob",
         "gen_urgent_prob", "task_default_prob", "rand_crisis_magnitude_min", "rand_crisis_magnitude_max", "trust_init",
         "trust_honour_rate", "trust_break_rate", "public_break_rate", "belief_rate", "yield_belief_decay",
         "w_individual", "w_team", "reward_share"}
_POSITIVE = {"total_cores", "total_ram", "episode_hours", "minutes_per_step", "charter_hours",
             "gen_duration_min", "gen_slack_min", "obs_clip"}


def field_spec(name: str) -> Field:
    """What a field accepts; shapes name 'A' (seats), 'K' (task slots), 'T' (A*K), 'C' (crises)."""
    if name in _STATIC:
        return _STATIC[name]
    if name in ("task_exists", "task_urgent"):
        return Field("bool", ("A", "K"))
    if name == "task_deps":
        return Field("bool", ("T", "T"))
    if name in _TASK_FIELDS:
        return Field("float", ("A", "K"), lo=0.0)
    if name in ("crisis_kind",):
        return Field("int", ("C",), lo=0, hi=NUM_CRISIS_KINDS - 1)
    if name == "crisis_level":
        return Field("int", ("C",), lo=0)
    if name == "crisis_magnitude":
        return Field("float", ("C",), lo=0.0, hi=1.0)
    if name in _CRISIS_FIELDS:
        return Field("float", ("C",), lo=0.0)
    if name == "rand_crisis_probs":
        return Field("float", (3,), lo=0.0, hi=1.0)
    if name == "rand_crisis_min_level":
        return Field("int", (3,), lo=0)
    if name.startswith("level_"):
        return Field("float", (NUM_LEVELS,), lo=0.0)
    if name == "belief_init":
        return Field("float", (4,), lo=0.0)
    if name in _MODES:
        return Field("int", (), lo=0, hi=_MODES[name])
    if name in _INT_MIN:
        return Field("int", (), lo=_INT_MIN[name])
    if name in _UNIT:
        return Field("float", (), lo=0.0, hi=1.0)
    return Field("float", (), lo=0.0, lo_open=name in _POSITIVE)


def build_params(cls, overrides: dict[str, Any], default_crises: tuple, lookups: dict[str, dict]):
    """-> cls(**validated values); raises TypeError/ValueError `CrisisParams.<field>: ...` on the first bad field.

    `default_crises`: schedule rows for unset crisis_* fields; `lookups`: field -> {name: code}
    for fields that also take a name ("random", "delta", ...).
    """
    names = [f.name for f in dataclasses.fields(cls)]
    for k in overrides:
        if k not in names:
            _fail(k, f"unknown field (known: {sorted(names)})")
    values = {f.name: f.default for f in dataclasses.fields(cls)}
    values.update(overrides)

    A = static_int(_FAIL, "num_agents", values["num_agents"], _STATIC["num_agents"].lo, _STATIC["num_agents"].hi)
    K = static_int(_FAIL, "max_tasks", values["max_tasks"], _STATIC["max_tasks"].lo, MAX_SLOTS // A)
    C = static_int(_FAIL, "max_crises", values["max_crises"], _STATIC["max_crises"].lo, _STATIC["max_crises"].hi)
    dep = values["dependency_features"]
    if not isinstance(dep, (bool, np.bool_)):
        _FAIL.type("dependency_features", f"expected true or false, got {type(dep).__name__} {dep!r}")
    for field, table in lookups.items():
        v = values[field]
        if isinstance(v, str):
            if v not in table:
                _fail(field, f"expected one of {sorted(table)} or its code, got {v!r}")
            values[field] = table[v]
    _fill_defaults(values, A, K, C, default_crises)

    dims = {"A": A, "K": K, "T": A * K, "C": C}
    out = {n: check(_FAIL, n, values[n], field_spec(n), dims) for n in names if n not in _STATIC}
    _check_tasks(out, A, K)
    _check_rest(out, values)
    return cls(num_agents=A, max_tasks=K, max_crises=C, dependency_features=bool(dep), **{k: jnp.asarray(v) for k, v in out.items()})


def _fill_defaults(values: dict, A: int, K: int, C: int, default_crises: tuple) -> None:
    """Unset task fields come from the default set (or an empty one when it does not fit); unset crisis
    fields from the default schedule padded with NONE entries."""
    unset = [f for f in _TASK_FIELDS if values[f] is None]
    if unset:
        defaults = default_task_arrays(A, K)
        if defaults is None:
            if len(unset) < len(_TASK_FIELDS):
                _fail(unset[0], "the default task set needs num_agents >= 3 and max_tasks >= 4; give every task_* field")
            if _is_zero(values["task_source"]):
                _fail("task_source", "the default task set needs num_agents >= 3 and max_tasks >= 4; "
                      "use task_source='random' or give the task_* fields")
            defaults = empty_task_arrays(A, K)
        for f in unset:
            values[f] = defaults[f]
    rows = list(default_crises[:C]) + [(0, 0.0, 0.0, 0.0, 0)] * max(0, C - len(default_crises))
    for i, f in enumerate(_CRISIS_FIELDS):
        if values[f] is None:
            values[f] = [r[i] for r in rows]


def _is_zero(v) -> bool:
    """True for a scalar number equal to 0 (before the field's own check runs)."""
    try:
        return not isinstance(v, (str, bytes, bool)) and np.ndim(v) == 0 and float(v) == 0.0
    except (TypeError, ValueError):
        return False


def _check_tasks(out: dict, A: int, K: int) -> None:
    ex = out["task_exists"]
    for f, total in (("task_cores", "total_cores"), ("task_ram", "total_ram"), ("task_gpu", "total_gpu")):
        if np.any(np.where(ex, out[f], 0) > out[total]):
            _fail(f, f"a task needs more than {total} ({float(out[total]):g}): it could never run")
    if np.any(ex & (out["task_duration_min"] <= 0)):
        _fail("task_duration_min", "every existing task needs a duration > 0")
    deps = out["task_deps"]
    if np.any(np.diag(deps)):
        _fail("task_deps", "a task cannot depend on itself")
    if np.any(deps & ~ex.reshape(-1)[None, :]):
        _fail("task_deps", "a dependency points at an empty slot")
    reach = deps.copy()  # transitive closure: a cycle would deadlock its tasks forever
    for _ in range(int(np.ceil(np.log2(max(A * K, 2)))) + 1):
        reach = reach | ((reach.astype(np.int32) @ reach.astype(np.int32)) > 0)
    if np.any(np.diag(reach)):
        _fail("task_deps", "dependencies contain a cycle")


def _check_rest(out: dict, values: dict) -> None:
    steps = float(out["episode_hours"]) * 60.0 / float(out["minutes_per_step"])
    if abs(steps - round(steps)) > 1e-4:
        _fail("minutes_per_step", f"episode_hours * 60 must be a whole number of steps, got "
                                  f"{float(out['episode_hours']):g} h / {float(out['minutes_per_step']):g} min")
    if steps > INT32_MAX:
        _fail("minutes_per_step", f"the episode would have {steps:.3g} steps, beyond int32")
    if abs(float(out["rand_crisis_probs"].sum()) - 1) > 1e-5:
        _fail("rand_crisis_probs", f"expected 3 probabilities summing to 1, got {values['rand_crisis_probs']!r}")
    if out["belief_init"][3] > 1:
        _fail("belief_init", f"the 4th entry is a yield probability, must be <= 1, got {values['belief_init']!r}")
    for lo, hi in (("gen_cores_min", "gen_cores_max"), ("gen_ram_min", "gen_ram_max"),
                   ("gen_duration_min", "gen_duration_max"), ("gen_slack_min", "gen_slack_max"),
                   ("rand_crisis_start_min_h", "rand_crisis_start_max_h"),
                   ("rand_crisis_duration_min_h", "rand_crisis_duration_max_h"),
                   ("rand_crisis_magnitude_min", "rand_crisis_magnitude_max")):
        if out[lo] > out[hi]:
            _fail(hi, f"must be >= {lo} ({float(out[lo]):g}), got {float(out[hi]):g}")
    if out["gen_cores_max"] > out["total_cores"] - out["level_core_cut"].max():
        _fail("gen_cores_max", "must fit the cluster at every curriculum level")
    if out["gen_ram_max"] > out["total_ram"] - out["level_ram_cut"].max():
        _fail("gen_ram_max", "must fit the cluster at every curriculum level")
    if np.any(out["level_core_cut"] >= out["total_cores"]):
        _fail("level_core_cut", "must leave at least part of a core")
    if np.any(out["level_ram_cut"] >= out["total_ram"]):
        _fail("level_ram_cut", "must leave some RAM")
    _reward_bound(out, steps)


def _reward_bound(out: dict, steps: float) -> None:
    """A step's reward must stay finite in float32: bound each term over every task slot and step."""
    A, K = out["task_exists"].shape
    hours = float(out["episode_hours"])
    per_task = {f: float(out[f]) for f in ("on_time_base", "on_time_bonus", "late_base", "late_penalty_cap",
                                           "missed_deadline_penalty")}
    per_task.update(early_bonus_per_hour=float(out["early_bonus_per_hour"]) * hours,
                    late_rate=float(out["late_rate"]) * hours)
    terms = {f: A * K * v for f, v in per_task.items()}
    terms.update(wait_penalty=A * K * float(out["wait_penalty"]) * steps,
                 invalid_penalty=A * float(out["invalid_penalty"]) * steps,
                 team_broken_contract=A * A * float(out["team_broken_contract"]) * steps)
    terms.update({f: float(out[f]) for f in ("team_completion", "team_on_time", "team_incomplete", "team_all_done",
                                             "team_fairness")})
    worst = max(terms, key=terms.get)
    finite_bound(_FAIL, worst, sum(terms.values()), f"a step's reward (largest term: {worst}={float(out[worst]):g})")

"""Turn user overrides into validated CrisisParams: bad values fail here, naming the field."""
from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp
import numpy as np

from nexus_jax.envs.crisis.constants import NUM_CRISIS_KINDS, NUM_LEVELS

_STATIC = {"num_agents", "max_tasks", "max_crises"}
_BOOL = {"task_exists", "task_urgent", "task_deps"}
_INT = {"task_source", "crisis_source", "crisis_kind", "crisis_level", "curriculum_level",
        "negotiation_min_level", "contract_ttl", "rand_crisis_min_level", "team_reward_mode"}
_PROBS = {"gen_task_prob", "gen_gpu_prob", "gen_gpu_prob_last", "gen_chain_prob", "gen_cross_dep_prob",
          "gen_urgent_prob", "crisis_magnitude", "rand_crisis_probs", "rand_crisis_magnitude_min",
          "rand_crisis_magnitude_max", "trust_init", "trust_honour_rate", "trust_break_rate",
          "public_break_rate", "belief_rate", "yield_belief_decay", "w_individual", "w_team"}
_POSITIVE = {"total_cores", "total_ram", "episode_hours", "minutes_per_step", "charter_hours",
             "contract_ttl", "gen_duration_min", "gen_slack_min", "obs_clip"}
_PER_LEVEL = {"level_deadline_slack_h", "level_core_cut", "level_ram_cut"}
_TASK_FIELDS = ("task_exists", "task_urgent", "task_cores", "task_ram", "task_gpu",
                "task_duration_min", "task_deadline_h", "task_deps")
_CRISIS_FIELDS = ("crisis_kind", "crisis_start_h", "crisis_duration_h", "crisis_magnitude", "crisis_level")


def _fail(field: str, msg: str):
    raise ValueError(f"CrisisParams.{field}: {msg}")


def _lookup(values, field, table):
    v = values[field]
    if isinstance(v, str):
        if v not in table:
            _fail(field, f"must be one of {sorted(table)}, got {v!r}")
        values[field] = table[v]


def build_params(cls, overrides: dict[str, Any]):
    from nexus_jax.envs.crisis.params import CRISIS_SOURCES, DEFAULT_CRISES, TASK_SOURCES, TEAM_REWARD_MODES
    from nexus_jax.envs.crisis.tasks import default_task_arrays, empty_task_arrays

    names = {f.name for f in dataclasses.fields(cls)}
    for k in overrides:
        if k not in names:
            _fail(k, f"unknown field (known: {sorted(names)})")
    values = {f.name: f.default for f in dataclasses.fields(cls)}
    values.update(overrides)

    for f in _STATIC:
        if not isinstance(values[f], (int, np.integer)) or isinstance(values[f], bool) or values[f] < 1:
            _fail(f, f"must be a positive int, got {values[f]!r}")
    A, K, C = values["num_agents"], values["max_tasks"], values["max_crises"]
    if A < 2:
        _fail("num_agents", f"must be >= 2 (negotiation needs peers), got {A}")
    _lookup(values, "team_reward_mode", TEAM_REWARD_MODES)
    _lookup(values, "task_source", TASK_SOURCES)
    _lookup(values, "crisis_source", CRISIS_SOURCES)

    # Task set: unset fields come from the default set (or an empty one when it does not fit).
    unset = [f for f in _TASK_FIELDS if values[f] is None]
    if unset:
        defaults = default_task_arrays(A, K)
        if defaults is None:
            if len(unset) < len(_TASK_FIELDS):
                _fail(unset[0], f"the default task set needs num_agents >= 3 and max_tasks >= 4; give every task_* field")
            if int(np.asarray(values["task_source"])) == 0:
                _fail("task_source", "the default task set needs num_agents >= 3 and max_tasks >= 4; "
                      "use task_source='random' or give the task_* fields")
            defaults = empty_task_arrays(A, K)
        for f in unset:
            values[f] = defaults[f]
    # Crisis schedule: unset fields come from DEFAULT_CRISES padded with NONE entries.
    rows = list(DEFAULT_CRISES[:C]) + [(0, 0.0, 0.0, 0.0, 0)] * max(0, C - len(DEFAULT_CRISES))
    for i, f in enumerate(_CRISIS_FIELDS):
        if values[f] is None:
            values[f] = [r[i] for r in rows]

    out = {}
    for name, v in values.items():
        if name in _STATIC:
            out[name] = v
            continue
        dtype = bool if name in _BOOL else np.int32 if name in _INT else np.float32
        raw = np.asarray(v)
        arr = raw.astype(dtype)
        if name in _INT and not np.all(arr == raw):
            _fail(name, f"must be an integer, got {v!r}")
        if name not in _BOOL:
            if not np.all(np.isfinite(arr)):
                _fail(name, f"must be finite, got {v!r}")
            if np.any(arr < 0):
                _fail(name, f"must be non-negative, got {v!r}")
        if name in _PROBS and np.any(arr > 1):
            _fail(name, f"must lie in [0, 1], got {v!r}")
        if name in _POSITIVE and np.any(arr <= 0):
            _fail(name, f"must be > 0, got {v!r}")
        if name in _PER_LEVEL and arr.shape != (NUM_LEVELS,):
            _fail(name, f"must have one value per curriculum level, shape ({NUM_LEVELS},), got {arr.shape}")
        out[name] = arr

    for f in _TASK_FIELDS:
        want = (A * K, A * K) if f == "task_deps" else (A, K)
        if out[f].shape != want:
            _fail(f, f"must have shape {want}, got {out[f].shape}")
    for f in _CRISIS_FIELDS:
        if out[f].shape != (C,):
            _fail(f, f"must have shape (max_crises,) = ({C},), got {out[f].shape}")
    if out["total_gpu"].ndim == 0 and out["total_gpu"] < 0:
        _fail("total_gpu", "must be non-negative")
    ex = out["task_exists"]
    for f, total in (("task_cores", "total_cores"), ("task_ram", "total_ram"), ("task_gpu", "total_gpu")):
        if np.any(np.where(ex, out[f], 0) > out[total]):
            _fail(f, f"a task needs more than {total} ({out[total]}): it could never run")
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
    if np.any(out["crisis_kind"] >= NUM_CRISIS_KINDS):
        _fail("crisis_kind", f"ids must be < {NUM_CRISIS_KINDS}")
    if np.any(out["curriculum_level"] >= NUM_LEVELS):
        _fail("curriculum_level", f"must be in 0..{NUM_LEVELS - 1}, got {values['curriculum_level']!r}")
    if np.any(out["task_source"] > 1):
        _fail("task_source", "must be 0 ('default') or 1 ('random')")
    if np.any(out["crisis_source"] > 1):
        _fail("crisis_source", "must be 0 ('schedule') or 1 ('random')")
    if np.any(out["team_reward_mode"] > 1):
        _fail("team_reward_mode", "must be 0 ('delta') or 1 ('level')")
    steps = out["episode_hours"] * 60.0 / out["minutes_per_step"]
    if np.any(np.abs(steps - np.round(steps)) > 1e-4):
        _fail("minutes_per_step", "episode_hours * 60 must be a whole number of steps")
    if out["rand_crisis_probs"].shape != (3,) or abs(float(out["rand_crisis_probs"].sum()) - 1) > 1e-5:
        _fail("rand_crisis_probs", "must be 3 probabilities summing to 1")
    if out["rand_crisis_min_level"].shape != (3,):
        _fail("rand_crisis_min_level", "must give one level per random kind (GPU_OUTAGE, URGENT_TASK, RESOURCE_PRESSURE)")
    if out["belief_init"].shape != (4,):
        _fail("belief_init", "must be (cores, RAM, GPU, yield probability)")
    for lo, hi in (("gen_cores_min", "gen_cores_max"), ("gen_ram_min", "gen_ram_max"),
                   ("gen_duration_min", "gen_duration_max"), ("gen_slack_min", "gen_slack_max"),
                   ("rand_crisis_start_min_h", "rand_crisis_start_max_h"),
                   ("rand_crisis_duration_min_h", "rand_crisis_duration_max_h"),
                   ("rand_crisis_magnitude_min", "rand_crisis_magnitude_max")):
        if np.any(out[lo] > out[hi]):
            _fail(hi, f"must be >= {lo}")
    if np.any(out["gen_cores_max"] > out["total_cores"] - out["level_core_cut"].max()):
        _fail("gen_cores_max", "must fit the cluster at every curriculum level")
    if np.any(out["gen_ram_max"] > out["total_ram"] - out["level_ram_cut"].max()):
        _fail("gen_ram_max", "must fit the cluster at every curriculum level")
    if np.any(out["level_core_cut"] >= out["total_cores"]):
        _fail("level_core_cut", "must leave at least part of a core")
    if np.any(out["level_ram_cut"] >= out["total_ram"]):
        _fail("level_ram_cut", "must leave some RAM")

    return cls(**{k: (v if k in _STATIC else jnp.asarray(v)) for k, v in out.items()})

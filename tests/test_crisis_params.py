"""CrisisParams validation and the default task set as data (no compilation).

The property tests draw one field and one kind of bad value for it (a wrong type, a wrong
shape, a non-finite or out-of-range entry) and require a TypeError/ValueError that names the
field and shows the value.
"""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from nexus_jax.envs.crisis.constants import Crisis
from nexus_jax.envs.crisis.curriculum import CurriculumThresholds, advance_level
from nexus_jax.envs.crisis.negotiation import decode, encode, num_actions
from nexus_jax.envs.crisis.params import CrisisParams
from nexus_jax.envs.crisis.constants import Base, Nego
from nexus_jax.envs.crisis.param_fields import field_spec
from nexus_jax.base.fields import INT32_MAX

STATIC = {"num_agents", "max_tasks", "max_crises"}  # shape-giving ints
FLAGS = {"dependency_features"}  # static bools (validated in tests/test_crisis_dependencies.py)
TRACED = [f.name for f in dataclasses.fields(CrisisParams) if f.name not in STATIC | FLAGS]
DEFAULT = CrisisParams.create()
FUZZ = settings(max_examples=150, deadline=None, derandomize=True)


def test_default_task_set_matches_spec():
    p = CrisisParams.create()
    assert (float(p.total_cores), float(p.total_ram), float(p.total_gpu)) == (16.0, 32.0, 1.0)
    ex, urgent = np.asarray(p.task_exists), np.asarray(p.task_urgent)
    assert ex.sum() == 10 and urgent.sum() == 1 and (ex & ~urgent).sum() == 9
    np.testing.assert_array_equal(np.asarray(p.task_deadline_h)[:, :3],
                                  [[2.0, 2.5, 3.0], [3.5, 4.0, 4.5], [5.5, 6.5, 7.5]])
    np.testing.assert_array_equal(np.asarray(p.task_duration_min)[:, :3], [[45, 45, 40], [50, 50, 45], [90, 75, 30]])
    np.testing.assert_array_equal(np.asarray(p.task_gpu)[:, :3], [[0, 0, 0], [0, 0, 0], [1, 1, 1]])
    deps = np.asarray(p.task_deps)
    K = p.max_tasks
    t = lambda a, k: a * K + k  # noqa: E731
    assert deps[t(1, 0), t(0, 0)] and deps[t(1, 2), t(0, 2)]
    assert deps[t(2, 0), t(1, 0)] and deps[t(2, 0), t(1, 1)] and not deps[t(2, 0), t(1, 2)]
    assert deps[t(2, 1), t(1, 2)] and deps[t(2, 2), t(2, 0)] and deps[t(2, 2), t(2, 1)]
    assert deps.sum() == 8
    # Default scenario: outage at hour 3, urgent task at hour 5 [spec].
    kinds, starts = np.asarray(p.crisis_kind), np.asarray(p.crisis_start_h)
    assert 3.0 in starts[kinds == Crisis.GPU_OUTAGE] and starts[kinds == Crisis.URGENT_TASK].tolist() == [5.0]


@pytest.mark.parametrize("overrides, field", [
    (dict(num_cores=16), "num_cores"),
    (dict(total_cores=-1.0), "total_cores"),
    (dict(total_ram=0.0), "total_ram"),
    (dict(curriculum_level=5), "curriculum_level"),
    (dict(curriculum_level=1.5), "curriculum_level"),
    (dict(num_agents=1), "num_agents"),
    (dict(max_tasks=2), "task_source"),
    (dict(task_cores=np.full((3, 4), 40.0)), "task_cores"),
    (dict(task_deps=np.eye(12, dtype=bool)), "task_deps"),
    (dict(minutes_per_step=7.0), "minutes_per_step"),
    (dict(trust_init=1.5), "trust_init"),
    (dict(team_reward_mode="sum"), "team_reward_mode"),
    (dict(crisis_kind=(1, 2)), "crisis_kind"),
    (dict(level_core_cut=(0.0, 1.0)), "level_core_cut"),
    (dict(rand_crisis_probs=(0.5, 0.5, 0.5)), "rand_crisis_probs"),
    (dict(contract_ttl=True), "contract_ttl"), (dict(total_cores="16"), "total_cores"),
    (dict(total_cores=(16.0, 16.0)), "total_cores"), (dict(task_exists=np.ones((3, 4), np.int32)), "task_exists"),
    (dict(max_tasks=2, task_source=0.0), "task_source"), (dict(on_time_base=1e37), "on_time_base"),
    (dict(num_agents=3.0), "num_agents"), (dict(max_tasks=5000), "max_tasks"), (dict(belief_init=(2, 6, 0.3, 1.5)),
                                                                              "belief_init"),
])
def test_invalid_config_names_the_field(overrides, field):
    with pytest.raises((ValueError, TypeError), match=rf"^CrisisParams\.{field}:"):
        CrisisParams.create(**overrides)


def test_dependency_cycle_rejected():
    p = CrisisParams.create()
    deps = np.asarray(p.task_deps).copy()
    deps[0, 2 * 4 + 2] = True  # load_raw_batch_1 needs validate_models: a cycle through the pipeline
    with pytest.raises(ValueError, match=r"^CrisisParams\.task_deps: .*cycle"):
        CrisisParams.create(task_deps=deps)


def test_random_sources_allow_small_shapes():
    p = CrisisParams.create(num_agents=2, max_tasks=2, task_source="random", crisis_source="random")
    assert p.task_exists.shape == (2, 2) and int(p.task_source) == 1 and int(p.crisis_source) == 1


def test_action_encoding_roundtrip():
    K = 4
    assert num_actions(K) == 12
    flat = np.array([encode(Base.WAIT, Nego.HOLD), encode(Base.RELEASE, Nego.YIELD),
                     encode(Base.REQUEST, Nego.YIELD, slot=3), encode(Base.REQUEST, Nego.HOLD, slot=0), 12, -1])
    kind, slot, yields, ok = (np.asarray(x) for x in decode(flat, K))
    np.testing.assert_array_equal(kind[:4], [Base.WAIT, Base.RELEASE, Base.REQUEST, Base.REQUEST])
    np.testing.assert_array_equal(slot[2:4], [3, 0])
    np.testing.assert_array_equal(yields[:4], [False, True, True, False])
    np.testing.assert_array_equal(ok, [True, True, True, True, False, False])


def test_adaptive_curriculum_advances_only_when_all_thresholds_met():
    th = CurriculumThresholds(completion=0.7, fairness=0.8, belief_accuracy=0.5)
    assert int(advance_level(1, 0.9, 0.9, 0.6, th)) == 2
    assert int(advance_level(1, 0.6, 0.9, 0.6, th)) == 1
    assert int(advance_level(1, 0.9, 0.7, 0.6, th)) == 1
    assert int(advance_level(1, 0.9, 0.9, 0.4, th)) == 1
    assert int(advance_level(4, 1.0, 1.0, 1.0, th)) == 4
    np.testing.assert_array_equal(advance_level(np.array([0, 3]), np.array([0.8, 0.8]), 0.9, 0.6, th), [1, 4])


def _with_entry(good: np.ndarray, x):
    if good.ndim == 0:
        return x
    out = good.astype(object).copy()
    out.reshape(-1)[0] = x
    return out.tolist()


def _bad_values(name: str, draw) -> list:
    """Bad values of each class the field's spec rules out."""
    spec = field_spec(name)
    good = np.asarray(getattr(DEFAULT, name))
    bad = [draw(st.sampled_from(["1", "nan", b"1"])), {"value": 1}, None, object()]
    if spec.kind != "bool":
        bad.append(draw(st.booleans()))
        bad.append(_with_entry(good, draw(st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e39]))))
    else:
        bad.append(good.astype(np.float32))  # 0.0/1.0 are not bools: no silent cast
    if good.ndim == 0:
        bad.append([good.item()] * draw(st.integers(1, 3)))
    else:
        bad.append(good.reshape(-1)[:-1].tolist())  # flattened and one short
        bad.append(np.concatenate([good, good[:1]]).tolist())  # one row too many
    if spec.lo is not None:
        below = spec.lo - draw(st.floats(1e-3, 1e6)) if not spec.lo_open else spec.lo - draw(st.floats(0, 1e6))
        bad.append(_with_entry(good, int(np.floor(below)) if spec.kind == "int" else below))
    if spec.hi is not None:
        above = spec.hi + draw(st.floats(1e-2, 1e6))
        bad.append(_with_entry(good, int(np.ceil(above)) if spec.kind == "int" else above))
    if spec.kind == "int":
        bad.append(_with_entry(good, draw(st.floats(0.1, 0.9)) + 1))
        bad.append(_with_entry(good, draw(st.integers(INT32_MAX + 1, 2**80))))
    if name in ("task_source", "crisis_source", "team_reward_mode") or name.startswith("task_") or \
            name.startswith("crisis_"):
        bad = [b for b in bad if b is not None]  # None there means the default
    return bad


@FUZZ
@given(st.data())
def test_every_traced_field_rejects_bad_values_naming_it(data):
    name = data.draw(st.sampled_from(TRACED), label="field")
    bad = data.draw(st.sampled_from(_bad_values(name, data.draw)), label="value")
    with pytest.raises((ValueError, TypeError), match=rf"^CrisisParams\.{name}: "):
        CrisisParams.create(**{name: bad})


@FUZZ
@given(st.data())
def test_static_fields_reject_bad_values(data):
    name = data.draw(st.sampled_from(sorted(STATIC)), label="field")
    bad = data.draw(st.one_of(st.integers(-3, 0), st.sampled_from([True, 3.0, "3", None, [3], 2**40])), label="value")
    with pytest.raises((ValueError, TypeError), match=rf"^CrisisParams\.{name}: .*got"):
        CrisisParams.create(**{name: bad})

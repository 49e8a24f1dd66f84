"""Params: invalid configs fail at construction naming the field; defaults match SPEC.

The property tests draw one field and one kind of bad value for it (a wrong type, a wrong
shape, a non-finite or out-of-range entry) and require a TypeError/ValueError that names the
field and shows the value, raised by `create` before anything is stepped.
"""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from nexus_jax.base.fields import INT32_MAX
from nexus_jax.envs.nexus.constants import Archetype
from nexus_jax.envs.nexus.params import NexusParams
from nexus_jax.envs.nexus.param_fields import field_spec

STATIC = {"num_agents", "amount_grid", "ledger_size", "obs_ledger_events", "vault_queue_len"}
TRACED = [f.name for f in dataclasses.fields(NexusParams) if f.name not in STATIC]
DEFAULT = NexusParams.create()
FUZZ = settings(max_examples=150, deadline=None, derandomize=True)


@pytest.mark.parametrize("field, value", [
    ("num_agents", 1), ("num_agents", 65), ("num_agents", 2.5),
    ("wait_cost", -0.5), ("proposal_deposit", float("nan")),
    ("p_solar_flare", 1.5), ("p_grid_failure", -0.1), ("early_end_prob", 2.0),
    ("proposal_ttl", 0), ("signal_window", 0), ("max_steps", 0), ("vault_delay", 8),
    ("trust_alpha", 1.2), ("archetypes", (0, 1, 2)), ("archetypes", (0, 1, 2, 9)),
    ("behaviours", (0, 1, 2)), ("behaviours", (0, 1, 2, 9)),
    ("amount_grid", (1.0, 2.0)), ("amount_grid", (0.0, 5.0, 5.0)),
    ("reward_mode", "greedy"), ("upkeep", (1.0, 1.0, 1.0)), ("proposal_ttl", 2.5),
    ("obs_ledger_events", 40),
    # found by trying it as a new user (issue 17): raw NumPy errors, late crashes or silent acceptance
    ("wait_cost", "0.5"), ("wait_cost", {"a": 1}), ("max_steps", 2**31), ("max_steps", True),
    ("amount_grid", (0.0, "x")), ("wait_cost", (0.5, 0.5)), ("p_solar_flare", [[0.1]]),
    ("obs_scale", 1e-37), ("endowment", np.full((6, 2), 1e37)), ("w_utility", 1e35), ("trust_alpha", None),
    ("archetypes", (0, 1, 2, True)), ("ledger_size", 32.0), ("num_agents", True), ("amount_grid", "0 1 2"),
    ("income", [[1.0, 1.0]] * 5 + [[1.0]]), ("initial_collateral", 1e39), ("wait_cost", 2**70),
    ("max_steps", -2**70),
    # the patience rule (issue 19): one share per action type, reals >= 0
    ("wait_cost_types", (1.0, 0.0)), ("wait_cost_types", (1.0,) * 7 + (-1.0,)), ("wait_cost_types", 0.5),
    ("wait_cost_types", (1.0,) * 7 + (float("nan"),)),
])
def test_invalid_field_fails_naming_it(field, value):
    with pytest.raises((ValueError, TypeError), match=rf"^NexusParams\.{field}:"):
        NexusParams.create(**{field: value})


def test_unknown_field_is_named():
    with pytest.raises(ValueError, match="NexusParams.shock_probability: unknown field"):
        NexusParams.create(shock_probability=0.1)


def test_probabilities_must_not_sum_above_one():
    with pytest.raises(ValueError, match="p_grid_failure"):
        NexusParams.create(p_solar_flare=0.6, p_grid_failure=0.6)


def test_defaults_follow_spec():
    p = NexusParams.create()
    assert p.num_agents == 4 and p.amount_grid == (0, 1, 2, 5, 10, 20, 40)
    assert list(np.asarray(p.archetypes)) == [Archetype.LEARNER, Archetype.BULLY, Archetype.ALTRUIST,
                                              Archetype.TIT_FOR_TAT]
    assert float(p.wait_cost) == 0.5 and int(p.proposal_ttl) == 3 and float(p.trust_alpha) == pytest.approx(0.2)
    assert float(p.p_solar_flare) == pytest.approx(0.05) and float(p.p_grid_failure) == pytest.approx(0.10)
    assert int(p.max_steps) == 100 and int(p.reward_mode) == 0
    seven = NexusParams.create(num_agents=7)
    assert list(np.asarray(seven.archetypes)) == [0, 1, 2, 3, 1, 2, 3]  # archetypes repeat in order
    assert list(np.asarray(seven.behaviours)) == list(np.asarray(seven.archetypes))  # behaviours follow by default
    assert int(NexusParams.create(reward_mode="own").reward_mode) == 1


def _bad_values(name: str, draw) -> list:
    """Bad values for `name` of each class its spec allows: the error must name the field."""
    spec = field_spec(name)
    good = np.asarray(getattr(DEFAULT, name))
    bad = [draw(st.sampled_from(["1", "nan", b"1"])), {"value": good.tolist()}, object()]
    if name not in ("archetypes", "behaviours", "behaviour_shuffle"):  # None there means the default seats
        bad.append(None)
    if spec.kind != "bool":
        bad.append(draw(st.booleans()))  # bools are not numbers
    if good.ndim == 0:
        bad.append([good.item()] * draw(st.integers(1, 3)))  # a sequence for a scalar
    else:
        bad.append(good.reshape(-1)[: max(good.size - 1, 1)].tolist())  # one entry short
        bad.append(good.tolist() + [good.reshape(-1)[0].item()] if good.ndim == 1 else good[:, :1].tolist())
    bad.append(_with_entry(good, draw(st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e39]))))
    if spec.lo is not None:
        below = spec.lo - draw(st.floats(1e-3, 1e6)) if not spec.lo_open else spec.lo - draw(st.floats(0, 1e6))
        bad.append(_with_entry(good, int(np.floor(below)) if spec.kind == "int" else below))
    if spec.hi is not None:
        above = spec.hi + draw(st.floats(1e-2, 1e6))
        bad.append(_with_entry(good, int(np.ceil(above)) if spec.kind == "int" else above))
    if spec.kind == "int":
        bad.append(_with_entry(good, draw(st.floats(0.1, 0.9)) + 1))  # not an integer
        bad.append(_with_entry(good, draw(st.integers(INT32_MAX + 1, 2**80))))  # overflows int32 (and int64)
    return bad


def _with_entry(good: np.ndarray, x):
    if good.ndim == 0:
        return x
    out = good.astype(object).copy()
    out.reshape(-1)[0] = x
    return out.tolist()


@FUZZ
@given(st.data())
def test_every_traced_field_rejects_bad_values_naming_it(data):
    name = data.draw(st.sampled_from(TRACED), label="field")
    bad = data.draw(st.sampled_from(_bad_values(name, data.draw)), label="value")
    with pytest.raises((ValueError, TypeError), match=rf"^NexusParams\.{name}: .*(got|would reach)"):
        NexusParams.create(**{name: bad})


@FUZZ
@given(st.data())
def test_static_fields_reject_bad_values(data):
    name, bad = data.draw(st.sampled_from([
        ("num_agents", data.draw(st.one_of(st.integers(-5, 1), st.integers(65, 2**40)))),
        ("num_agents", data.draw(st.sampled_from([True, 4.0, "4", None, [4]]))),
        ("ledger_size", data.draw(st.sampled_from([0, -1, 32.0, "32", None, False]))),
        ("vault_queue_len", data.draw(st.sampled_from([0, 8.5, "8", True]))),
        ("amount_grid", data.draw(st.sampled_from([(), (0.0,), (1.0, 2.0), (0.0, 2.0, 1.0), (0.0, float("nan")),
                                                   (0.0, 1e39), (0.0, True), "0,1", {0: 1}, 5, (0.0, None)]))),
    ]), label="field, value")
    with pytest.raises((ValueError, TypeError), match=rf"^NexusParams\.{name}: .*got"):
        NexusParams.create(**{name: bad})


@FUZZ
@given(st.data())
def test_in_range_values_are_accepted_exactly(data):
    """The other side: a value inside a field's range is stored as given (float32), never reinterpreted."""
    name = data.draw(st.sampled_from([n for n in TRACED if field_spec(n).shape == () and field_spec(n).hi == 1.0
                                      and field_spec(n).kind == "float"
                                      and n not in ("p_solar_flare", "p_grid_failure")]))
    x = data.draw(st.floats(0.0, 1.0 / 1.5))  # / 1.5: the trust multipliers x alpha stay <= 1
    assert float(getattr(NexusParams.create(**{name: x}), name)) == float(np.float32(x))


def test_obs_scale_bound_depends_on_the_episode():
    """The smallest obs_scale is derived from holdings over max_steps, not a fixed constant."""
    NexusParams.create(obs_scale=1e-20)  # holdings ~1e3 -> observations ~1e23: finite
    with pytest.raises(ValueError, match=r"^NexusParams\.obs_scale: observations"):
        NexusParams.create(obs_scale=1e-28)
    with pytest.raises(ValueError, match=r"^NexusParams\.(income|obs_scale):"):
        NexusParams.create(obs_scale=1e-20, max_steps=2**31 - 1, income=np.full((6, 2), 1e9))

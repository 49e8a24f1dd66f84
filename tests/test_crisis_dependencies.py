"""crisis-v0's opt-in dependency features (`nexus_jax.envs.crisis.dependencies`): the transitive
closure against a breadth-first search, the default task set's values by hand, what a finished task changes,
the observation layout with the option on and off, and the option's validation (the rule that reads them,
`edf_chain`, is tested in tests/test_crisis_heuristics.py and, as the studies play it, in experiments/crisis)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nexus_jax
from nexus_jax.envs.crisis import CrisisParams, core
from nexus_jax.envs.crisis.dependencies import DEPENDENCY_FEATURES, closure, dependency_features
from nexus_jax.envs.crisis.observation import GLOBAL_FEATURES, TASK_FEATURES, get_obs
from nexus_jax.envs.crisis.tasks import generate_task_set



def _all_released(params):
    _, s = core.reset(jax.random.PRNGKey(0), params)
    return s.replace(released=s.tasks.exists)


def test_closure_matches_breadth_first_search():
    p = CrisisParams.create(task_source="random", max_tasks=5)
    for seed in range(5):
        deps = np.asarray(generate_task_set(jax.random.PRNGKey(seed), p).deps)
        want = np.zeros_like(deps)
        for t in range(len(deps)):
            todo = list(np.flatnonzero(deps[t]))
            while todo:
                u = todo.pop()
                if not want[t, u]:
                    want[t, u] = True
                    todo += list(np.flatnonzero(deps[u]))
        np.testing.assert_array_equal(np.asarray(closure(jnp.asarray(deps))), want)


def test_default_task_set_by_hand():
    """Seat 0: raw batches 1-3; seat 1: clean batches 1-3 (clean k needs raw k); seat 2: baseline (needs clean 1
    and 2), advanced (needs clean 3), validate (needs both models). Only batch 3 heads a chain nothing else blocks."""
    p = CrisisParams.create()
    f = np.asarray(dependency_features(_all_released(p), p)) * np.array([12, 12, 8, 8, 12])
    dependents, unlocks, unlock_h, chain_h, idle = (f[..., i] for i in range(DEPENDENCY_FEATURES))
    np.testing.assert_allclose(dependents[:, :3], [[3, 3, 3], [2, 2, 2], [1, 1, 0]])
    np.testing.assert_allclose(unlocks[:, :3], [[1, 1, 2], [0, 0, 1], [0, 0, 0]])
    np.testing.assert_allclose(unlock_h[0, :3], [50 / 60, 50 / 60, (45 + 75) / 60], rtol=1e-5)
    np.testing.assert_allclose(unlock_h[1, 2], 75 / 60, rtol=1e-5)
    # chain: raw 1 -> clean 1 -> baseline -> validate = 45 + 50 + 90 + 30 minutes
    np.testing.assert_allclose(chain_h[0, :3], [215 / 60, 215 / 60, 190 / 60], rtol=1e-5)
    np.testing.assert_allclose(chain_h[2, :3], [2.0, 105 / 60, 0.5], rtol=1e-5)
    assert f[0, 3, :3].sum() == 0  # the urgent slot: nothing depends on it
    np.testing.assert_allclose(idle[:, :3], [[1, 1, 2], [0, 0, 1], [0, 0, 0]])  # seats 1 and 2 have nothing ready
    busy = _all_released(p)
    busy = busy.replace(running_slot=busy.running_slot.at[1].set(0))  # seat 1 runs clean 1: not idle
    f = np.asarray(dependency_features(busy, p)) * 12
    np.testing.assert_allclose(f[0, :3, 4], [0, 0, 1])  # only batch 3's chain reaches the idle seat 2


def test_finished_work_changes_the_features():
    p = CrisisParams.create()

    def scale(s):  # counts and hours, rounded to the minute
        return np.rint(np.asarray(dependency_features(s, p)) * np.array([12, 12, 8, 8, 12]) * 60) / 60

    s = _all_released(p).replace(done=_all_released(p).done.at[0, 1].set(True))  # raw batch 2 done
    f = scale(s)
    assert f[0, 1].sum() == 0  # a done task has no features
    assert f[0, 0, 1] == 1  # raw 1 still unlocks only clean 1: baseline also waits on clean 2
    s = s.replace(done=s.done.at[1, 1].set(True))
    f = scale(s)
    assert f[0, 0, 1] == 2 and f[1, 0, 1] == 1  # with clean 2 done, raw 1's chain unlocks the baseline
    half = s.replace(progress_min=s.progress_min.at[2, 2].set(15.0))  # validate: 15 of 30 minutes left
    assert float(dependency_features(half, p)[2, 2, 3]) * 8 == pytest.approx(0.25)


def test_observation_layout_on_and_off():
    off = nexus_jax.make("crisis-v0")
    on = nexus_jax.make("crisis-v0", dependency_features=True)
    K = 4
    assert on.obs_dim == off.obs_dim + K * DEPENDENCY_FEATURES
    assert off.spec.slot_layout[2] == TASK_FEATURES and on.spec.slot_layout[2] == TASK_FEATURES + DEPENDENCY_FEATURES
    s = _all_released(on.default_params)
    a, b = np.asarray(get_obs(s, off.default_params)), np.asarray(get_obs(s, on.default_params))
    off_slots = a[:, GLOBAL_FEATURES + 3:GLOBAL_FEATURES + 3 + K * TASK_FEATURES].reshape(3, K, TASK_FEATURES)
    F = TASK_FEATURES + DEPENDENCY_FEATURES
    on_slots = b[:, GLOBAL_FEATURES + 3:GLOBAL_FEATURES + 3 + K * F].reshape(3, K, F)
    np.testing.assert_array_equal(on_slots[..., :TASK_FEATURES], off_slots)
    np.testing.assert_allclose(on_slots[..., TASK_FEATURES:], np.asarray(dependency_features(s, on.default_params)))
    np.testing.assert_array_equal(b[:, GLOBAL_FEATURES + 3 + K * F:], a[:, GLOBAL_FEATURES + 3 + K * TASK_FEATURES:])


def test_option_is_validated():
    with pytest.raises(TypeError, match="dependency_features"):
        CrisisParams.create(dependency_features=1)

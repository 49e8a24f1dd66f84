"""bench.ab's program comparison: identical programs read as the same, a changed one does not."""
import jax
import jax.numpy as jnp

from bench.ab import paired_times, program_diff, summarize


def _compiled(fn):
    return jax.jit(fn).lower(jnp.ones((4, 3))).compile()


def test_program_diff_tells_identical_programs_from_changed_ones():
    def first(x):
        return jnp.tanh(x * 2.0).sum(0)

    def second(x):  # another function, another source line: the same program
        return jnp.tanh(x * 2.0).sum(0)

    assert program_diff(_compiled(first), _compiled(second)) == "same"
    assert program_diff(_compiled(first), _compiled(lambda x: jnp.tanh(x * 3.0).sum(0))).endswith("lines differ")


def test_rounds_alternate_which_arm_runs_first_and_pairs_stay_in_order():
    calls = []
    fns = {"row": (lambda: calls.append("before"), lambda: calls.append("after"))}
    pairs = paired_times(fns, rounds=3, clock="wall")["row"]
    assert calls == ["before", "after", "after", "before", "before", "after"]
    assert len(pairs) == 3 and all(len(p) == 2 and min(p) >= 0 for p in pairs)


def test_summary_of_paired_ratios():
    sm = summarize([(2.0, 1.0), (1.0, 1.0), (3.0, 2.0)])  # ratios 2, 1, 1.5
    assert sm == {"best": 1.0, "median": 1.5, "low": 1.0, "high": 2.0}

"""bench.ab's program comparison: identical programs read as the same, a changed one does not."""
import jax
import jax.numpy as jnp

from bench.ab import program_diff


def _compiled(fn):
    return jax.jit(fn).lower(jnp.ones((4, 3))).compile()


def test_program_diff_tells_identical_programs_from_changed_ones():
    def first(x):
        return jnp.tanh(x * 2.0).sum(0)

    def second(x):  # another function, another source line: the same program
        return jnp.tanh(x * 2.0).sum(0)

    assert program_diff(_compiled(first), _compiled(second)) == "same"
    assert program_diff(_compiled(first), _compiled(lambda x: jnp.tanh(x * 3.0).sum(0))).endswith("lines differ")

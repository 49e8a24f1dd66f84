"""train.minibatches.scan_shuffled: the minibatches of one shuffle, gathered inside the scan."""
import jax
import jax.numpy as jnp
import numpy as np

from train.minibatches import scan_shuffled


def test_minibatches_are_the_shuffled_copy_cut_in_order_and_the_remainder_is_left_out():
    data = {"x": jnp.arange(22.0).reshape(11, 2), "i": jnp.arange(11)}
    key = jax.random.PRNGKey(3)
    seen, batches = scan_shuffled(lambda c, mb: (c + mb["i"].sum(), mb), 0, data, key, 3)
    perm = np.asarray(jax.random.permutation(key, 11))[:9].reshape(3, 3)
    np.testing.assert_array_equal(batches["i"], perm)  # minibatch k = the k-th slice of one permutation
    np.testing.assert_array_equal(batches["x"], np.asarray(data["x"])[perm])  # every leaf gathered alike
    assert int(seen) == perm.sum()  # the carry threads through the minibatches in order
    assert len(set(perm.ravel())) == 9  # no sample twice

"""The economy screen (train/screen.py): the default rules (nexus-v2) have the write-up's four properties, the SPEC
rules (nexus-v0) do not, and the statistics behind each verdict can fail."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nexus_jax
from nexus_jax.envs.nexus import NexusParams, reset
from train import screen
from train.learner_env import LearnerEnv

EPISODES = 256  # the margins at 1,000 episodes are 5-100x the CIs; at 256 the CIs are 2x wider and still clear


@pytest.fixture(scope="module")
def compiled():
    env = LearnerEnv.make(nexus_jax.DEFAULT_ENV, {}, "factored")
    return env, screen.make_screen(env, EPISODES)


@pytest.fixture(scope="module")
def default_economy(compiled):
    env, run = compiled
    rows, raw = screen.screen(env, env.default_params, run, jax.random.PRNGKey(5))
    return rows, screen.properties(rows, raw, 10, int(env.default_params.signal_window))


def test_the_default_economy_has_the_four_properties(default_economy):
    rows, props = default_economy
    failing = [k for k, v in props.items() if isinstance(v, dict) and "holds" in v and not v["holds"]]
    assert not failing, screen.format_screen(rows, props)
    assert rows[props["best_cooperative"]]["trades"]["mean"] > 20  # the best policy trades; the holders never do
    assert all(rows[n]["trades"]["mean"] == 0 for n in ("wait", "hoard", "autarky"))


def test_in_the_spec_rules_hoarding_wins(compiled):
    """The screen under nexus-v0's rules (traced params; its reliance flag is static and off, so one more
    compilation): the vault hedge beats every trader there, the issue the default economy was made to fix, so
    the passive-holding verdict can fail."""
    env, run = compiled
    v0 = LearnerEnv.make("nexus-v0", {}, "factored").default_params
    names = screen.TRADERS + ["wait", "hedge"]
    rows, raw = screen.screen(env, v0, run, jax.random.PRNGKey(5), names)
    best = max(screen.TRADERS, key=lambda n: rows[n]["return"]["mean"])
    margin = screen.paired(raw[best]["return"], raw["hedge"]["return"])
    assert margin["mean"] + margin["ci95"] < 0, margin


def test_trade_gains_are_the_utility_change_of_the_settled_amounts():
    """Seat 0 offers 10 E for 10 C to seat 1; both parties' min(E, C) change by hand arithmetic."""
    params = NexusParams.create()
    _, state = reset(jax.random.PRNGKey(0), params)
    avail = jnp.array([[50.0, 20.0], [10.0, 60.0], [30.0, 30.0], [30.0, 30.0]])
    p = state.proposals
    state = state.replace(available=avail.at[0, 0].add(-10.0), escrow=jnp.zeros((4, 2)).at[0, 0].set(10.0),
                          proposals=p.replace(active=p.active.at[0, 1].set(True), give=p.give.at[0, 1].set(10.0),
                                              want=p.want.at[0, 1].set(10.0), resource=p.resource.at[0, 1].set(0)))
    accepted = jnp.zeros((4, 4), bool).at[0, 1].set(True)
    gain, count = screen.trade_gains(state, accepted)
    # seat 0: (50, 20) -> (40, 30): +10; seat 1: (10, 60) -> (20, 50): +10; others untouched
    np.testing.assert_allclose(np.asarray(gain), [10.0, 10.0, 0.0, 0.0])
    np.testing.assert_allclose(np.asarray(count), [1.0, 1.0, 0.0, 0.0])


def test_shock_recovery_separates_connected_from_isolated_seats():
    """Hand traces: a seat that traded before the shock regains its loss, one that did not regains nothing."""
    t, e, n = 30, 4, 2
    u = np.full((t, e, n), 20.0)
    u[12:, :, :] = 10.0  # the shock at step 12 takes 10 from both
    u[14:, :, 0] = 20.0  # seat 0 is back two steps later
    loss = np.zeros((t, e, n))
    loss[12] = 10.0
    trades = np.zeros((t, e, n))
    trades[5, :, 0] = 1.0  # seat 0 traded in the 10 steps before the shock; seat 1 did not
    out = screen.shock_recovery({"u": u, "shock_loss": loss, "trades": trades}, 10)
    assert out["connected"]["mean"] == pytest.approx(1.0) and out["isolated"]["mean"] == pytest.approx(0.0)
    assert out["connected_minus_isolated"]["mean"] == pytest.approx(1.0)

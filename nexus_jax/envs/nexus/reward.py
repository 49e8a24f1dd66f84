"""The SPEC reward: w1 dU + w2 dCollateral_i + w3 ShockResilience_i - invalid_penalty * invalid_i.

With `reward_utility` "level" (nexus-v1) the utility term is the level U / max_steps instead of the change dU:
utility as a flow, so the return is w1 x the episode's mean utility (docs/design.md, "The default economy").

Plus an opt-in reward timing, `vault_shaping` (0 = off, the default): a potential-based term
w1 * vault_shaping * (Phi(state) - Phi(prev)) with Phi the utility that vault and withdrawals in
flight would add if they were liquid, and Phi = 0 after the episode's last step. It telescopes to
-Phi(reset) = 0 over every episode, so each episode's return is exactly SPEC's; what moves is
when a vault hedge's cost and payback are paid (at once, instead of the cost now and the payback
~90 steps later), which is what a discounted learner (gamma 0.99) cannot see across
(experiments/ecosystem/README.md, "Why an unmasked learner stops at WAIT").
"""
import jax.numpy as jnp

from nexus_jax.envs.nexus.arith import chain_sum, min_resource, small_sum
from nexus_jax.envs.nexus.observation import utility


def held_back(state) -> jnp.ndarray:
    """(N,) the utility vault and withdrawals in flight would add if they were liquid (>= 0)."""
    held = state.vault + chain_sum(state.withdrawals, 1)
    return min_resource(state.available + state.escrow + held) - utility(state)


def potential(state, done: jnp.ndarray, params) -> jnp.ndarray:
    """(N,) the shaping's potential: held_back x the share still counted at this step, 0 once the episode ended.

    With `vault_shaping_ramp` H > 0 the share falls linearly over the last H steps, so a vault still held
    that late is charged a step at a time instead of all on the last step."""
    left = (params.max_steps - state.step).astype(jnp.float32)
    ramp = params.vault_shaping_ramp.astype(jnp.float32)
    share = jnp.where(ramp > 0, jnp.clip(left / jnp.maximum(ramp, 1.0), 0.0, 1.0), 1.0)
    return jnp.where(done, 0.0, share * held_back(state))


def reward(prev, state, invalid: jnp.ndarray, done: jnp.ndarray, params) -> jnp.ndarray:
    """(N,) rewards of the step prev -> state; `done` () the episode ended with it.

    dU is the system's (reward_mode 0) or the agent's own (reward_mode 1); with `reward_utility` 1 ("level")
    the utility term pays U / max_steps instead of its change. An agent is never charged for another's
    failure except through the shared utility term.
    """
    u_prev, u_now = utility(prev), utility(state)
    paid = jnp.where(params.reward_utility == 1, u_now / params.max_steps.astype(jnp.float32), u_now - u_prev)
    d_own = paid + params.vault_shaping * (potential(state, done, params) - potential(prev, False, params))
    d_util = jnp.where(params.reward_mode == 1, d_own, small_sum(d_own))
    d_coll = state.collateral - prev.collateral
    resilient = (state.shock_remaining > 0) & (u_now > params.resilience_threshold)
    return (params.w_utility * d_util + params.w_collateral * d_coll + params.w_resilience * resilient
            - params.invalid_penalty * invalid)

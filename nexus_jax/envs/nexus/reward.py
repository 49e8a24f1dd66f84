"""The SPEC reward: w1 dU + w2 dCollateral_i + w3 ShockResilience_i - invalid_penalty * invalid_i."""
import jax.numpy as jnp

from nexus_jax.envs.nexus.observation import utility


def reward(prev, state, invalid: jnp.ndarray, params) -> jnp.ndarray:
    """(N,) rewards. dU is the system's (reward_mode 0) or the agent's own (reward_mode 1).

    An agent is never charged for another's failure except through the shared dU term.
    """
    u_prev, u_now = utility(prev), utility(state)
    d_own = u_now - u_prev
    d_util = jnp.where(params.reward_mode == 1, d_own, d_own.sum())
    d_coll = state.collateral - prev.collateral
    resilient = (state.shock_remaining > 0) & (u_now > params.resilience_threshold)
    return (params.w_utility * d_util + params.w_collateral * d_coll + params.w_resilience * resilient
            - params.invalid_penalty * invalid)

"""The vault hedge: a scripted override of any seat's actions that shields holdings from shocks.

Shocks take a fraction of *liquid* holdings; the vault is shock-proof but does not count in
utility, and an UNVAULT arrives `vault_delay` steps later. So a seat that vaults what it holds
at the start and unvaults it before the end keeps its utility at the end and loses less to
shocks on the way (`python -m experiments.research.hedge_headroom` measures the gain). None of the NPC archetypes
does this; `train.bc` can add it to a teacher, so that behaviour cloning sees the hedge.
"""
import jax.numpy as jnp

from nexus_jax.envs.nexus.constants import ActionType


def default_unvault_step(params, margin: int = 3) -> int:
    """The last step whose UNVAULT still arrives `margin` steps before the episode ends."""
    return int(params.max_steps) - int(params.vault_delay) - margin


def _largest_level(amount: jnp.ndarray, params) -> jnp.ndarray:
    """Index of the largest amount level <= `amount` (0 when even the smallest is too large)."""
    return (params.grid()[1:] <= amount[..., None]).sum(-1).astype(jnp.int32)


def hedge_actions(actions: jnp.ndarray, state, params, seats, vault_now: jnp.ndarray, unvault_at,
                  unvault=True) -> jnp.ndarray:
    """Structured actions (A, 5) of `seats` (one env) with the hedge laid over them.

    At step 0 (energy) and step 1 (compute) a seat whose `vault_now` (A,) is true VAULTs the
    largest amount level it holds of that resource; at steps `unvault_at` (an int or traced) and
    `unvault_at + 1` every seat UNVAULTs the largest level its vault holds of energy, then compute
    (unless `unvault`, traced, is false). Other steps, and seats with nothing to move, keep their own action.
    """
    seats = jnp.asarray(seats)
    available, vault = state.available[seats], state.vault[seats]  # (A, 2)
    schedule = ((0, ActionType.VAULT, 0, available, vault_now), (1, ActionType.VAULT, 1, available, vault_now),
                (unvault_at, ActionType.UNVAULT, 0, vault, unvault),
                (unvault_at + 1, ActionType.UNVAULT, 1, vault, unvault))
    for step, kind, resource, held, wanted in schedule:
        level = _largest_level(held[:, resource], params)
        zero = jnp.zeros_like(level)
        row = jnp.stack([zero + int(kind), zero, level, zero, zero + resource], -1)
        actions = jnp.where(((state.step == step) & wanted & (level > 0))[:, None], row, actions)
    return actions

"""Registered env ids as pytest parameters for the per-env suites (API, JaxMARL shapes, gymnax view).

The quick suite runs every crisis id and the nexus ids whose programs differ in kind (one learner, self-play,
the research scenarios); the variants that only resize the population or change the NPC mix compile the same
code at other sizes or constants, so they run in the full tier (`-m slow`)."""
import pytest

import nexus_jax

FULL_TIER = {"nexus-8-v0", "nexus-16-v0", "nexus-cheater-v0", "nexus-mixed-v0", "nexus-research-attribution-v0",
             "nexus-research-hidden-selfplay-v0", "nexus-research-selfplay-v0"}


def env_ids() -> list:
    """Every registered id, those of `FULL_TIER` marked slow."""
    assert FULL_TIER <= set(nexus_jax.registered_envs()), FULL_TIER - set(nexus_jax.registered_envs())
    return [pytest.param(e, marks=pytest.mark.slow) if e in FULL_TIER else e for e in nexus_jax.registered_envs()]

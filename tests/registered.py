"""Registered env ids as pytest parameters for the per-env suites (API, JaxMARL shapes, gymnax view).

The quick suite runs every crisis id and the nexus ids whose programs differ in kind: the SPEC rules (nexus-v0),
the default economy (nexus-v2) with one learner, in self-play and with hidden types (behaviour_shuffle). The
other variants only resize the population, change the NPC mix or move rule values, compiling the same code at
other sizes or constants, so they run in the full tier (`-m slow`)."""
import pytest

import nexus_jax

QUICK_NEXUS = {"nexus-v0", "nexus-v2", "nexus-selfplay-v2", "nexus-research-hidden-v2"}


def env_ids() -> list:
    """Every registered id, the nexus ids outside `QUICK_NEXUS` marked slow."""
    ids = nexus_jax.registered_envs()
    assert QUICK_NEXUS <= set(ids), QUICK_NEXUS - set(ids)
    return [pytest.param(e, marks=pytest.mark.slow) if e.startswith("nexus") and e not in QUICK_NEXUS else e
            for e in ids]

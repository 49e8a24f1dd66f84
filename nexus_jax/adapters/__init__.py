"""Ecosystem adapters (optional extras; `import nexus_jax` never imports them).

- `nexus_jax.adapters.pettingzoo`: `NexusParallelEnv`, a PettingZoo `ParallelEnv` (extra `pettingzoo`).
- `nexus_jax.adapters.gymnasium`: `NexusGymEnv`, a Gymnasium env for one learner seat (extra `gymnasium`);
  registers `NexusJax/Nexus-v0`.
- `nexus_jax.adapters.openenv`: an OpenEnv environment server over the text protocol (extra `openenv`).

Each keeps the JAX state on the host between calls and compiles reset/step once per env
config (`nexus_jax.adapters._core`). See docs/protocol.md, "Ecosystem adapters".
"""

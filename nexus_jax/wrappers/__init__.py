"""Wrappers: episode metrics logging (`LogWrapper`) and batching (`VecEnv`)."""
from nexus_jax.wrappers.batch import VecEnv
from nexus_jax.wrappers.log import LogEnvState, LogWrapper
from nexus_jax.envs.nexus.metrics import EpisodeAcc, accumulate, gini, init_acc, summarize

__all__ = ["VecEnv", "LogEnvState", "LogWrapper", "EpisodeAcc", "accumulate", "gini", "init_acc", "summarize"]

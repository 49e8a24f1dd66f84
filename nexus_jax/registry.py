"""The `make` registry: every env id and variant, each a factory taking param overrides."""
from __future__ import annotations

from typing import Any, Callable, Dict

DEFAULT_ENV = "nexus-v2"  # the default economy: what the commands, views and adapters make unless told otherwise

_REGISTRY: Dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {}


def register(env_id: str, factory: Callable[..., Any], **defaults: Any) -> None:
    """Register `env_id`; `defaults` are param overrides baked into this variant."""
    if env_id in _REGISTRY:
        raise ValueError(f"env id {env_id!r} is already registered")
    _REGISTRY[env_id] = (factory, dict(defaults))


def variant(env_id: str) -> tuple[Callable[..., Any], dict[str, Any]]:
    """-> (factory, the overrides baked into `env_id`): what a view over the id reads without building it."""
    if env_id not in _REGISTRY:
        raise ValueError(f"unknown env id {env_id!r}; registered: {registered_envs()}")
    factory, defaults = _REGISTRY[env_id]
    return factory, dict(defaults)


def make(env_id: str, **overrides: Any):
    """Build a registered env; keyword overrides set params fields (validated, naming the field)."""
    factory, defaults = variant(env_id)
    return factory(**{**defaults, **overrides})


def registered_envs() -> list[str]:
    """Every registered env id, sorted."""
    return sorted(_REGISTRY)

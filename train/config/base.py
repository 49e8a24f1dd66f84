"""The one config mechanism: YAML files and `key=value` overrides read into frozen dataclasses, each value
checked against its field's type and each key named in the error, before anything compiles."""
from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Any

import yaml

import nexus_jax
from nexus_jax.cli import UserInputError, one_line
from train.loggers import LOGGERS, WANDB_MODES, missing_extra

CONFIGS = Path(__file__).resolve().parents[2] / "configs"  # the checkout's YAML defaults


class ConfigError(UserInputError, ValueError):
    """A config file, key or value cannot be used; the message names the file or key."""


def read_yaml(path: str | Path) -> dict:
    """A YAML mapping from `path`, or ConfigError naming the file: missing, unreadable, invalid YAML, not a mapping."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"config file {str(path)!r}: not found") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as e:
        raise ConfigError(f"config file {str(path)!r}: cannot be read ({type(e).__name__})") from None
    try:
        values = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or one_line(e)
        raise ConfigError(f"config file {str(path)!r}: invalid YAML{where}: {problem}") from None
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise ConfigError(f"config file {str(path)!r}: expected a mapping of config keys, got {type(values).__name__}")
    return values


def fail(key: str, msg: str):
    """Raise the ConfigError naming `key`."""
    raise ConfigError(f"config key {key!r}: {msg}")


_TYPE_NAMES = {"str": str, "int": int, "float": float, "bool": bool, "dict": dict, "tuple": tuple}


def coerce(key: str, typ: Any, value: Any) -> Any:
    """Check `value` against the field's type: ints are accepted for floats, numeric strings too (YAML 1.1
    reads `1e-3` as a string), lists for tuples; anything else is a ConfigError naming `key`."""
    if typ is bool:
        if not isinstance(value, bool):
            fail(key, f"must be true or false, got {value!r}")
        return value
    if typ is int:
        if isinstance(value, bool) or not isinstance(value, int):
            fail(key, f"must be an integer, got {value!r}")
        return value
    if typ is float:
        value = numbers(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            fail(key, f"must be a number, got {value!r}")
        return float(value)
    if typ is str:
        if not isinstance(value, str):
            fail(key, f"must be a string, got {value!r}")
        return value
    if typ is dict:
        if not isinstance(value, dict):
            fail(key, f"must be a mapping, got {value!r}")
        return dict(value)
    if typ is tuple:
        if not isinstance(value, (list, tuple)):
            fail(key, f"must be a list, got {value!r}")
        return tuple(value)
    raise AssertionError(typ)


def build(cls, values: dict, section: str = ""):
    """The one way a config section is read: a `cls` dataclass from a mapping, missing keys at the dataclass
    defaults; an unknown key or a value of the wrong type is a ConfigError naming `section.key`.
    Range checks are the dataclass's own `check()` (called here when it has one)."""
    prefix = f"{section}." if section else ""
    hints = typing.get_type_hints(cls)
    types = {f.name: _TYPE_NAMES.get(f.type, hints[f.name]) for f in dataclasses.fields(cls)}
    renamed = getattr(cls, "RENAMED", {})
    out = {}
    for key, value in values.items():
        if key in renamed and key not in types:
            fail(prefix + key, f"renamed: use {renamed[key]}")
        if key not in types or not isinstance(types[key], type):
            fail(prefix + key, f"unknown key (known: {sorted(k for k, t in types.items() if isinstance(t, type))})")
        if dataclasses.is_dataclass(types[key]):  # a nested section
            if not isinstance(value, dict):
                fail(prefix + key, f"must be a mapping of {types[key].__name__} keys, got {value!r}")
            out[key] = build(types[key], value, prefix + key)
        else:
            out[key] = coerce(prefix + key, types[key], value)
    cfg = cls(**out)
    if hasattr(cfg, "check"):
        cfg.check(prefix)
    return cfg


def check_logger(cfg, prefix: str = "") -> None:
    """The experiment-tracking keys (`logger`, `wandb_mode`) of a config: known values, the logger's extra installed."""
    for key, choices in (("logger", LOGGERS), ("wandb_mode", WANDB_MODES)):
        if getattr(cfg, key) not in choices:
            fail(prefix + key, f"must be one of {choices}, got {getattr(cfg, key)!r}")
    problem = missing_extra(cfg.logger)
    if problem:
        fail(prefix + "logger", problem)


def check_env(cfg, prefix: str = ""):
    """Build the env once (no compilation): an unknown env id or env param fails here, named. -> the env."""
    if cfg.env_id not in nexus_jax.registered_envs():
        fail(prefix + "env_id", f"unknown env id {cfg.env_id!r} (registered: {nexus_jax.registered_envs()})")
    try:
        env = nexus_jax.make(cfg.env_id, **cfg.env)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"config key '{prefix}env': {one_line(e)}") from None
    if getattr(cfg, "action_head", "factored") == "factored" and "structured" not in env.spec.action_formats:
        fail(prefix + "action_head", f"env {cfg.env_id!r} has no factored action view; use action_head=flat")
    return env


def parse_overrides(args: list[str]) -> dict:
    """`["lr=1e-3", "env.num_agents=6", "slot.prior=0.5"]` -> `{"lr": 0.001, "env": {"num_agents": 6}, "slot":
    {"prior": 0.5}}`: a dotted key sets a key of a section (values parsed as YAML)."""
    out: dict = {}
    for arg in args:
        if "=" not in arg:
            raise ConfigError(f"override {arg!r}: expected key=value")
        key, raw = arg.split("=", 1)
        key = key.strip()
        value = numbers(parse_value(key, raw))
        head, dot, rest = key.partition(".")
        if not dot:
            out[key] = value
        elif not isinstance(out.setdefault(head, {}), dict):
            raise ConfigError(f"override {arg!r}: {head} was set to a value, not a section")
        else:
            out[head][rest] = value
    return out


def parse_value(key: str, raw: str):
    """An override's value parsed as YAML (`1e-3`, `[1, 2]`, `true`), or ConfigError naming the key."""
    if not raw.strip():
        return ""
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError as e:
        raise ConfigError(f"override {key}={raw!r}: invalid YAML value ({getattr(e, 'problem', None) or one_line(e)})") \
            from None


def numbers(value):
    """YAML 1.1 reads `1e-3` as a string; turn numeric strings (also inside lists) into floats."""
    if isinstance(value, list):
        return [numbers(v) for v in value]
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value

"""Frozen, self-validating configuration dataclasses.

Every study has one config class deriving from :class:`Config`. Fields are declared with
:func:`param`, which records the help text and the allowed range; construction validates
every field (type and range) and then calls the class's ``check()`` for cross-field rules.
A bad value raises :class:`ConfigError` naming the field, the value and what is allowed,
which the CLI prints on one line before exiting with code 2.

Overrides arrive as strings from the command line (``--set lr=0.1``) and are converted with
the field's declared type, so ``lr=abc`` fails as clearly as ``lr=-1``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, TypeVar

__all__ = [
    "ConfigError",
    "UserError",
    "Config",
    "param",
    "parse_value",
    "apply_overrides",
    "config_hash",
]


class UserError(Exception):
    """A mistake in what the user asked for: printed on one line, exit code 2."""


class ConfigError(UserError, ValueError):
    """A config field holds a value outside what is allowed."""

    def __init__(self, field: str, value: Any, allowed: str):
        self.field, self.value, self.allowed = field, value, allowed
        super().__init__(f"{field}={value!r} is not allowed: {allowed}")


def param(
    default: Any,
    help: str,
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    choices: Sequence[Any] | None = None,
    nonfinite: bool = False,
    since: str | None = None,
) -> Any:
    """A config field with its help text and allowed range (checked at construction).

    Numbers must be finite (no inf or nan) unless ``nonfinite=True``. ``since`` marks a field
    added after runs were stored (the date or issue that added it): at its default it is left
    out of the point's key (:meth:`Config.key`), so the points of runs stored before it keep
    their keys and can still be resumed, reused and re-executed.
    """
    meta = {"help": help, "ge": ge, "gt": gt, "le": le, "lt": lt, "choices": choices,
            "nonfinite": nonfinite, "since": since}
    if isinstance(default, list):
        default = tuple(default)
    return dataclasses.field(default=default, metadata=meta)


def _range_text(meta: Mapping[str, Any]) -> str:
    parts = []
    if meta.get("choices") is not None:
        return "one of " + ", ".join(str(c) for c in meta["choices"])
    for key, sym in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
        if meta.get(key) is not None:
            parts.append(f"{sym} {meta[key]}")
    return "a value " + " and ".join(parts) if parts else "any value"


def _strip_optional(tp: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0], True
    return tp, False


def _type_name(tp: Any) -> str:
    base, optional = _strip_optional(tp)
    if typing.get_origin(base) is tuple:
        inner = typing.get_args(base)[0]
        name = f"a comma-separated list of {inner.__name__}"
    else:
        name = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(
            base, str(base)
        )
    return name + (" or none" if optional else "")


def parse_value(tp: Any, text: str, field: str) -> Any:
    """Convert a command-line string to the field's declared type."""
    base, optional = _strip_optional(tp)
    raw = text.strip()
    if optional and raw.lower() in ("none", "null", ""):
        return None
    if typing.get_origin(base) is tuple:
        inner = typing.get_args(base)[0]
        items = [s for s in raw.replace(";", ",").split(",") if s.strip()]
        return tuple(parse_value(inner, s, field) for s in items)
    try:
        if base is bool:
            low = raw.lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if base is int:
            as_float = float(raw)
            if not as_float.is_integer():
                raise ValueError(raw)
            return int(as_float)
        if base is float:
            return float(raw)
        if base is str:
            return raw
    except ValueError:
        raise ConfigError(field, text, f"expected {_type_name(tp)}") from None
    raise ConfigError(field, text, f"cannot parse type {tp}")


def _check_type(tp: Any, value: Any, field: str) -> Any:
    """Check (and gently coerce: int -> float, list -> tuple) a Python value."""
    base, optional = _strip_optional(tp)
    if value is None:
        if optional:
            return None
        raise ConfigError(field, value, f"expected {_type_name(tp)}")
    if typing.get_origin(base) is tuple:
        if isinstance(value, str | bytes) or not isinstance(value, Sequence):
            raise ConfigError(field, value, f"expected {_type_name(tp)}")
        inner = typing.get_args(base)[0]
        return tuple(_check_type(inner, v, field) for v in value)
    if base is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value) + 0.0  # -0.0 + 0.0 is 0.0: a point's hash must not tell them apart
    if base is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if base is int and isinstance(value, bool):
        raise ConfigError(field, value, f"expected {_type_name(tp)}")
    if not isinstance(value, base):
        raise ConfigError(field, value, f"expected {_type_name(tp)}")
    return value


def _check_range(meta: Mapping[str, Any], value: Any, field: str) -> None:
    values = value if isinstance(value, tuple) else (value,)
    for v in values:
        if v is None:
            continue
        choices = meta.get("choices")
        if choices is not None and v not in choices:
            raise ConfigError(field, value, _range_text(meta))
        if isinstance(v, int | float) and not isinstance(v, bool):
            if not math.isfinite(v) and not meta.get("nonfinite"):
                rng = _range_text(meta)
                raise ConfigError(field, value, "a finite number" + (f" ({rng})" if rng != "any value" else ""))
            if v != v:  # NaN never satisfies a range
                raise ConfigError(field, value, _range_text(meta))
            ok = (
                (meta.get("ge") is None or v >= meta["ge"])
                and (meta.get("gt") is None or v > meta["gt"])
                and (meta.get("le") is None or v <= meta["le"])
                and (meta.get("lt") is None or v < meta["lt"])
            )
            if not ok:
                raise ConfigError(field, value, _range_text(meta))


C = TypeVar("C", bound="Config")


@dataclasses.dataclass(frozen=True)
class Config:
    """Base of every study config: frozen, typed, validated at construction.

    Subclasses declare fields with :func:`param` and may override :meth:`check` for rules
    that involve several fields (raise :class:`ConfigError` there).
    """

    seed: int = param(0, "random seed of this run (every generator derives from it)", ge=0)

    study: ClassVar[str] = "config"

    def __post_init__(self) -> None:
        hints = _type_hints(type(self))
        for f in dataclasses.fields(self):
            value = _check_type(hints[f.name], getattr(self, f.name), f.name)
            object.__setattr__(self, f.name, value)
            _check_range(f.metadata, value, f.name)
        self.check()

    def check(self) -> None:
        """Cross-field validation; subclasses raise ConfigError."""

    # -- helpers -------------------------------------------------------------------------
    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def describe(cls) -> list[tuple[str, str, Any, str]]:
        """(name, type, default, help) for every field, for `robustlab list`."""
        hints = typing.get_type_hints(cls)
        out = []
        for f in dataclasses.fields(cls):
            help_ = f.metadata.get("help", "")
            rng = _range_text(f.metadata)
            if rng != "any value":
                help_ = f"{help_} [{rng}]"
            out.append((f.name, _type_name(hints[f.name]), f.default, help_))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def key_dict(self) -> dict[str, Any]:
        """What identifies the point: every field, but a field marked ``since`` at its default."""
        return {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)
                if not (f.metadata.get("since") and getattr(self, f.name) == f.default)}

    def key(self) -> str:
        """The point's key in a store and a manifest: :func:`config_hash` of :meth:`key_dict`."""
        return config_hash(self.key_dict())

    @classmethod
    def from_dict(cls: type[C], data: Mapping[str, Any]) -> C:
        unknown = set(data) - set(cls.field_names())
        if unknown:
            key = sorted(unknown)[0]
            raise ConfigError(key, data[key], _unknown_text(cls, key))
        return cls(**data)

    def replace(self: C, **changes: Any) -> C:
        unknown = set(changes) - set(self.field_names())
        if unknown:
            key = sorted(unknown)[0]
            raise ConfigError(key, changes[key], _unknown_text(type(self), key))
        return dataclasses.replace(self, **changes)


@functools.cache
def _type_hints(cls: type) -> dict[str, Any]:
    """``typing.get_type_hints(cls)``, once per class: it re-evaluates every annotation on each
    call, most of the time a plan spends building its configs."""
    return typing.get_type_hints(cls)


def did_you_mean(name: object, choices: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices`` to a mistyped ``name``, or ""."""
    import difflib

    close = difflib.get_close_matches(str(name), list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_key_text(study: str, key: str, names: Sequence[str]) -> str:
    """What a ``--set``/``--grid`` of an unknown field says: the study, a hint, the known keys."""
    return f"unknown key for study {study!r}{did_you_mean(key, names)}; known keys: " + ", ".join(names)


def _unknown_text(cls: type[Config], key: str = "") -> str:
    return unknown_key_text(cls.study, key, cls.field_names())


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value


def apply_overrides(cfg: C, overrides: Mapping[str, str]) -> C:
    """Apply ``key=value`` strings to a config, converting with each field's type."""
    hints = typing.get_type_hints(type(cfg))
    changes: dict[str, Any] = {}
    for key, text in overrides.items():
        if key not in hints or key not in cfg.field_names():
            raise ConfigError(key, text, _unknown_text(type(cfg), key))
        changes[key] = parse_value(hints[key], text, key)
    return cfg.replace(**changes)


def config_hash(data: Mapping[str, Any]) -> str:
    """A stable short hash of a JSON-able mapping (the key of a sweep point)."""
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]

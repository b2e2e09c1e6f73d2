"""The checking engine of the agent's YAML: a dataclass per mapping, a check per key.

Durations (``30s``, ``1m30s``) and sizes (``256MiB``) are read here too: they are how the
YAML spells its values.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields
from typing import get_type_hints

from edgesync.errors import ConfigError

__all__ = ["BAD", "BOOL", "BOOL_MAP", "COUNT", "DURATION", "OPT_STR", "SIZE",
           "STR", "STR_LIST", "Check", "YamlKey", "choice", "load_mapping",
           "parse_duration", "parse_size", "scalar", "section"]

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?i?B?)\s*$", re.IGNORECASE)
_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
    "t": 1000**4, "tb": 1000**4,
    "ki": 1024, "kib": 1024, "mi": 1024**2, "mib": 1024**2, "gi": 1024**3, "gib": 1024**3,
    "ti": 1024**4, "tib": 1024**4,
}


def parse_duration(value: object) -> float:
    """Seconds from ``30s``, ``500ms``, ``1m30s``, ``2h`` or a plain number of seconds."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 5s, 500ms or 1m")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        pos, seconds = 0, 0.0
        for m in _DURATION_PART.finditer(text):
            if m.start() != pos:
                break
            seconds += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
            pos = m.end()
        if not text or pos != len(text):
            raise ValueError(f"{value!r} is not a duration; use e.g. 5s, 500ms, 1m30s")
    else:
        raise ValueError("expected a duration such as 5s, 500ms or 1m")
    if seconds <= 0:
        raise ValueError("must be greater than zero")
    return seconds


def parse_size(value: object) -> int:
    """Bytes from an integer or ``256MiB``, ``512KiB``, ``1GB`` (binary and decimal units)."""
    if isinstance(value, bool):
        raise ValueError("expected a size such as 256MiB")
    if isinstance(value, int):
        size = value
    elif isinstance(value, str):
        m = _SIZE.match(value)
        unit = m.group(2).lower() if m else ""
        if not m or unit not in _SIZE_UNITS:
            raise ValueError(f"{value!r} is not a size; use e.g. 268435456, 256MiB or 1GB")
        size = int(float(m.group(1)) * _SIZE_UNITS[unit])
    else:
        raise ValueError("expected a size such as 256MiB")
    if size <= 0:
        raise ValueError("must be greater than zero")
    return size


# --------------------------------------------------------------------------- file shape
#
# Each ``_File*`` dataclass is one YAML mapping; each field one key, declared once as
# ``name: Annotated[type, check] = default``. ``load_mapping`` reads a mapping into its dataclass:
# unknown keys, missing required keys and values a check refuses all become ``ConfigError``s
# whose field is the dotted YAML path. (No pydantic: it alone cost the agent ~18 MB of RSS.)

Check = Callable[[object, str, list[ConfigError]], object]
BAD = object()  # a value a check refused (its error already recorded)


@dataclass(frozen=True, slots=True)
class YamlKey:
    """The YAML spelling of a key that is no Python name (``sqlite-replication``)."""

    key: str


def scalar(convert: Callable[[object], object], *, nullable: bool = False) -> Check:
    def check(value: object, path: str, errors: list[ConfigError]) -> object:
        if value is None and nullable:
            return None
        try:
            return convert(value)
        except ValueError as exc:
            errors.append(ConfigError(path, str(exc)))
            return BAD
    return check


def _as_str(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError("must be a string (quote the value in the YAML)")
    return value


_TRUE = frozenset({"true", "yes", "on", "y", "t", "1"})
_FALSE = frozenset({"false", "no", "off", "n", "f", "0"})


def _as_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | str) and str(value).strip().lower() in _TRUE | _FALSE:
        return str(value).strip().lower() in _TRUE
    raise ValueError(f"{value!r} is not a boolean; use true or false")


def _as_count(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).isdigit():
        raise ValueError(f"{value!r} is not a whole number >= 0; use e.g. 50000 (0: never)")
    return int(value)


def _as_str_list(value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("must be a list of strings, e.g. [a, b]")
    return value


def _as_bool_map(value: object) -> dict[str, bool]:
    if not isinstance(value, dict):
        raise ValueError("must be a mapping of names to true or false")
    return {str(k): _as_bool(v) for k, v in value.items()}


def choice(*allowed: str) -> Callable[[object], str]:
    spelled = ", ".join(repr(a) for a in allowed[:-1]) + (
        f" or {allowed[-1]!r}" if len(allowed) > 1 else repr(allowed[0]))

    def convert(value: object) -> str:
        if value not in allowed:
            raise ValueError(f"{value!r} is not allowed; use {spelled}")
        return str(value)
    return convert


STR = scalar(_as_str)
OPT_STR = scalar(_as_str, nullable=True)
BOOL = scalar(_as_bool)
DURATION = scalar(parse_duration)
SIZE = scalar(parse_size)
COUNT = scalar(_as_count)
STR_LIST = scalar(_as_str_list)
BOOL_MAP = scalar(_as_bool_map)


def section(cls: type, *, nullable: bool = False, extra: bool = False) -> Check:
    def check(value: object, path: str, errors: list[ConfigError]) -> object:
        if value is None and nullable:
            return None
        return load_mapping(cls, value, path, errors, extra=extra)
    return check


_SPECS: dict[type, list[tuple[str, str, Check, bool]]] = {}


def _spec(cls: type) -> list[tuple[str, str, Check, bool]]:
    """(attribute, YAML key, check, required) of each field of a ``_File*`` dataclass, read
    once from its ``Annotated[type, check]`` annotations."""
    if cls not in _SPECS:
        hints = get_type_hints(cls, include_extras=True)
        spec = []
        for f in fields(cls):
            extras = hints[f.name].__metadata__
            check = next(e for e in extras if callable(e) and not isinstance(e, YamlKey))
            key = next((e.key for e in extras if isinstance(e, YamlKey)), f.name)
            required = f.default is MISSING and f.default_factory is MISSING
            spec.append((f.name, key, check, required))
        _SPECS[cls] = spec
    return _SPECS[cls]


def load_mapping(cls: type, data: object, path: str, errors: list[ConfigError], *,
          extra: bool = False) -> object:
    """``data`` (a YAML mapping) as ``cls``, or ``BAD`` with every problem in ``errors``."""
    if not isinstance(data, dict):
        errors.append(ConfigError(path or "(top level)", "must be a mapping (key: value lines)"))
        return BAD
    prefix = f"{path}." if path else ""
    values: dict[str, object] = {}
    bad = False
    spec = _spec(cls)
    for name, key, check, required in spec:
        if key not in data:
            if required:
                errors.append(ConfigError(prefix + key, "required section or key is missing"))
                bad = True
            continue
        got = check(data[key], prefix + key, errors)
        bad = bad or got is BAD
        values[name] = got
    if not extra:
        known = {key for _, key, _, _ in spec}
        for key in data:
            if key not in known:
                errors.append(ConfigError(f"{prefix}{key}", "unknown key"))
                bad = True
    return BAD if bad else cls(**values)

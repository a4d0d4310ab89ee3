"""How a ``TauConfig`` key is declared once and how a refused value reads: one line naming the key.

:func:`setting` declares a field: its default, its range as pydantic constraints (``ge``/``gt``/``le``), its
help text (``description``: the YAML docs and the CLI's ``--help`` both read it) and how a message names its
values (``noun``: "seconds", "a share"; ``note``: "(0 = off)"). pydantic checks every value; :func:`refusal`
turns its ``ValidationError`` into the one-line ``ConfigError`` text this package promises: the key as the
front door spells it (``tau_max_turns`` from slime's YAML, ``--max-turns`` from the CLI), the value and what
is expected. Nothing here knows a particular field. Imports only ``errors``.
"""

from __future__ import annotations

import difflib
import enum
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any, Literal, Union

from pydantic import Field, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from slime_tau_plugin.engine.errors import ConfigError

KeyNamer = Callable[[str], str]
"""Field name -> the key a message names (``tau_<field>`` for slime's YAML, the flag for the CLI)."""

_OPERATORS = (("ge", ">="), ("gt", ">"), ("le", "<="))
_NOUNS = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


def tau_key(name: str) -> str:
    """The slime YAML key of field ``name`` (``--custom-config-path`` sets ``args.tau_<name>``)."""
    return f"tau_{name}"


def key_namer(context: Mapping[str, Any] | None) -> KeyNamer:
    """The namer a front door passed as pydantic's validation ``context`` (``{"key_of": ...}``), else YAML keys."""
    return (context or {}).get("key_of") or tau_key


def setting(
    default: Any,
    description: str,
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    noun: str | None = None,
    note: str | None = None,
) -> Any:
    """A field's one declaration: default, range, help text and the words its refusal uses."""
    words = {key: value for key, value in (("noun", noun), ("note", note)) if value}
    return Field(default, description=description, ge=ge, gt=gt, le=le, json_schema_extra=words or None)


def value_type(field: FieldInfo) -> tuple[Any, bool]:
    """The field's value type without ``None``, and whether ``None`` (YAML ``null``) is allowed."""
    kind = field.annotation
    if typing.get_origin(kind) in (Union, types.UnionType):
        members = [a for a in typing.get_args(kind) if a is not type(None)]
        return members[0], len(members) < len(typing.get_args(kind))
    return kind, False


def choices(field: FieldInfo) -> tuple[str, ...] | None:
    """The values a choice field takes, in declaration order (an enum's values or a ``Literal``'s); else None."""
    kind, _ = value_type(field)
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return tuple(str(member.value) for member in kind)
    if typing.get_origin(kind) is Literal:
        return tuple(str(value) for value in typing.get_args(kind))
    return None


def bounds(field: FieldInfo) -> dict[str, Any]:
    """The field's range constraints by name (``ge``, ``gt``, ``le``)."""
    found: dict[str, Any] = {}
    for item in field.metadata:
        for name in ("ge", "gt", "le"):
            if getattr(item, name, None) is not None:
                found[name] = getattr(item, name)
    return found


def expectation(field: FieldInfo, *, nullable: bool = True) -> str:
    """What a refused value should have been, in words: "an integer >= 1 or null", "seconds > 0"."""
    kind, optional = value_type(field)
    words = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    limit = bounds(field)
    if "gt" in limit and "le" in limit:
        span = f"in ({limit['gt']}, {limit['le']}]"
    elif "ge" in limit and "le" in limit:
        span = f"from {limit['ge']} to {limit['le']}"
    else:
        span = " ".join(f"{op} {limit[name]}" for name, op in _OPERATORS if name in limit)
    noun = words.get("noun") or _NOUNS.get(kind, str(kind))
    text = " ".join(part for part in (noun, span, words.get("note")) if part)
    return f"{text} or null" if optional and nullable else text


def refuses_bool(field: FieldInfo, value: Any) -> bool:
    """A boolean given for a number: pydantic's lax mode would read ``true`` as 1, never a count or a share."""
    kind, _ = value_type(field)
    return isinstance(value, bool) and kind in (int, float)


def refused(field: FieldInfo, shown: str, value: Any, *, nullable: bool = True) -> str:
    """The one-line refusal of ``value`` for ``field``; ``shown`` is ``key=value`` as the front door spells it."""
    options = choices(field)
    if options is not None and value is not None:
        return f"{shown} is unknown; expected one of {', '.join(sorted(options))}"
    return f"{shown} is invalid; expected {expectation(field, nullable=nullable)}"


def refusal(exc: ValidationError, fields: Mapping[str, FieldInfo], key_of: KeyNamer) -> str:
    """pydantic's first error as our one line: a ``ConfigError`` a validator raised keeps its own words."""
    error = exc.errors()[0]
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, ConfigError):
        return str(cause)
    name = str(error["loc"][0]) if error["loc"] else ""
    if error["type"] == "extra_forbidden":
        return unknown_key(name, key_of(name), fields, "tau_")
    if name not in fields:
        return f"TauConfig: {error['msg']}"
    return refused(fields[name], f"{key_of(name)}={error.get('input')!r}", error.get("input"))


def checked_value(field: FieldInfo, value: Any, shown: str, *, nullable: bool = True) -> Any:
    """``value`` as the field's type (``"30"`` -> 30, ``"fast"`` -> ``RewardMode.FAST``), range checked.

    Raises:
        ConfigError: ``<shown> is invalid; expected ...`` (or ``is unknown; expected one of ...``).
    """
    if refuses_bool(field, value):
        raise ConfigError(refused(field, shown, value, nullable=nullable))
    kind = Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation
    try:
        return TypeAdapter(kind).validate_python(value)
    except ValidationError:
        raise ConfigError(refused(field, shown, value, nullable=nullable)) from None


def known_key(name: str, where: str, fields: Iterable[str], prefix: str, source: str = "") -> str:
    """``name`` if it is a config field; else ConfigError with the one typo hint every front door gives.

    Raises:
        ConfigError: "<where> is not a slime_tau_plugin setting; did you mean <prefix><closest>?".
    """
    if name in fields:
        return name
    raise ConfigError(unknown_key(name, where, fields, prefix, source))


def unknown_key(name: str, where: str, fields: Iterable[str], prefix: str, source: str = "") -> str:
    """The one typo hint every front door gives for a key that is not a config field."""
    fields = sorted(fields)
    close = difflib.get_close_matches(name, fields, n=1, cutoff=0.6)
    hint = f"did you mean {prefix}{close[0]}?" if close else f"valid keys: {', '.join(prefix + f for f in fields)}"
    return f"{where} is not a slime_tau_plugin setting{' ' + source if source else ''}; {hint}"

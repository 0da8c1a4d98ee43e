"""JSON as a type: what a JSON text decodes to, for the true JSON boundaries (a sample log's
payload, an lmms-eval doc or results file, a run's description, an API's usage block).

Recursive, so mypy checks what is put in (a Path or a tuple is an error) and makes a reader
narrow what it takes out (``isinstance`` or :func:`number`) instead of trusting it.
``TypeAliasType`` (not a plain alias) so pydantic models can declare JSON fields too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping  # noqa: F401 (named in JSONMapping's value)
from typing import TYPE_CHECKING, Any, TypeVar

from typing_extensions import TypeAliasType

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

D = TypeVar("D", bound="DataclassInstance")

#: a decoded JSON value
JSON = TypeAliasType("JSON", "str | int | float | bool | None | list[JSON] | dict[str, JSON]")
#: a decoded JSON object (what a writer builds)
JSONObject = TypeAliasType("JSONObject", "dict[str, JSON]")
#: a JSON object as a reader takes it (read-only, so any JSON object's subtype fits)
JSONMapping = TypeAliasType("JSONMapping", "Mapping[str, JSON]")


def number(value: JSON) -> float:
    """``float(value)`` for a JSON value: a number (or a numeric string, as ``float`` reads it);
    anything else is the TypeError ``float`` raises."""
    if isinstance(value, (int, float, str)):
        return float(value)
    raise TypeError(f"float() argument must be a string or a real number, not {type(value).__name__!r}")


def integer(value: JSON) -> int:
    """``int(value)`` for a JSON value (a number or a numeric string, as ``int`` reads it)."""
    if isinstance(value, (int, float, str)):
        return int(value)
    raise TypeError(f"int() argument must be a string or a real number, not {type(value).__name__!r}")


def member(value: JSON, *keys: str) -> JSON:
    """``value[k1][k2]…`` of a decoded document: None (JSON's null) where a key is absent or a
    level is not an object, so a reader of a foreign file (lmms-eval's) asks once, not per level."""
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def as_object(value: JSON) -> JSONObject:
    """``value`` when it is a JSON object, else an empty one (absent, null, or another kind)."""
    return value if isinstance(value, dict) else {}


def as_str(value: JSON) -> str | None:
    """``value`` when it is a string, else None."""
    return value if isinstance(value, str) else None


def as_int(value: JSON) -> int | None:
    """``value`` when it is an integer (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def from_record(cls: type[D], record: JSONMapping) -> D:
    """The dataclass ``cls`` from a JSON record that one of its own wrote (``asdict``): its fields
    by name; a field with a default may be absent (an older record), unknown keys are left out.
    The one place a record's values are trusted to be the fields' types (their writer's)."""
    values: dict[str, Any] = {f.name: record[f.name] for f in dataclasses.fields(cls) if f.name in record}
    return cls(**values)

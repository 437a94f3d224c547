"""JSON round trip of declarations: ``from_json(to_json(x)) == x`` for every declaration class.

Each dataclass is written as an object with a ``"kind"`` key naming its class; tuples become
lists and come back as tuples. Only classes registered with :func:`serializable` can be read
back, so a spec file can never instantiate anything else.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from estflow.dsl.errors import DslError

__all__ = ["serializable", "to_dict", "from_dict", "to_json", "from_json"]

_REGISTRY: dict[str, type] = {}


def serializable(cls: type) -> type:
    """Class decorator: register a frozen dataclass for JSON round trips (returns it unchanged)."""
    _REGISTRY[cls.__name__] = cls
    return cls


def to_dict(value: Any) -> Any:
    """A JSON-ready structure for a declaration (dataclasses, tuples, dicts, scalars)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {"kind": type(value).__name__}
        for field in dataclasses.fields(value):
            if field.metadata.get("serialize", True):
                out[field.name] = to_dict(getattr(value, field.name))
        return out
    if isinstance(value, (list, tuple)):
        return [to_dict(v) for v in value]
    if isinstance(value, dict):
        return {"kind": "dict", "items": {str(k): to_dict(v) for k, v in sorted(value.items())}}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise DslError("value", "a JSON-serialisable declaration", type(value).__name__)


def from_dict(data: Any) -> Any:
    """Inverse of :func:`to_dict`."""
    if isinstance(data, list):
        return tuple(from_dict(v) for v in data)
    if isinstance(data, dict):
        kind = data.get("kind")
        if kind == "dict":
            return {k: from_dict(v) for k, v in data["items"].items()}
        cls = _REGISTRY.get(kind)
        if cls is None:
            raise DslError("kind", f"one of {sorted(_REGISTRY)} or 'dict'", kind)
        return cls(**{k: from_dict(v) for k, v in data.items() if k != "kind"})
    return data


def to_json(value: Any) -> str:
    """Deterministic JSON (sorted keys) of a declaration."""
    return json.dumps(to_dict(value), sort_keys=True, indent=1)


def from_json(text: str) -> Any:
    """Read a declaration back from :func:`to_json` output."""
    return from_dict(json.loads(text))

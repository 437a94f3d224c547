"""JSON round trip of declarations: ``from_json(to_json(x)) == x`` for every declaration class.

Each dataclass is written as an object with a ``"kind"`` key naming its class; tuples become
lists and come back as tuples. Only classes registered with :func:`serializable` can be read
back, so a spec file can never instantiate anything else.

A source kind declared outside estflow (a :class:`~estflow.dsl.sources.Source` subclass in the
user's module) is written as ``"module:QualName"``, and, when declared in a pipeline file that
estflow loaded from its path (not importable by name), with that file as ``"kind_file"``. A
process that reads such a kind without having declared it (a step's own process) imports its
module, or runs that file, as a step resolves a :class:`~estflow.dsl.refs.CallableRef`, and
accepts it only if that declares the kind (a ``Source`` subclass) there; importing the module
is also what makes its reader known (the module registers it when imported).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from estflow.dsl.errors import DslError

__all__ = ["serializable", "kind_name", "to_dict", "from_dict", "to_json", "from_json"]

_REGISTRY: dict[str, type] = {}
_WRITTEN: dict[type, tuple[str, str | None]] = {}  # class -> (its kind, the file declaring it)
_IMPORTABLE: set[str] = set()  # kinds declared outside estflow: read back by importing them
FILE_KEY = "kind_file"
"""The key of the file that declares a kind declared in a pipeline file (beside ``"kind"``)."""


def kind_name(cls: type) -> str:
    """The ``"kind"`` a class is written as: its name for estflow's own classes,
    ``"module:QualName"`` for one declared outside estflow."""
    module = cls.__module__
    if module == "estflow" or module.startswith("estflow."):
        return cls.__name__
    return f"{module}:{cls.__qualname__}"


def serializable(cls: type, *, importable: bool = False) -> type:
    """Class decorator: register a frozen dataclass for JSON round trips (returns it unchanged).

    ``importable``: the class may be declared outside estflow (a source kind): it is written as
    ``"module:QualName"`` (:func:`kind_name`), which a process that never imported its module
    reads back by importing it."""
    name = kind_name(cls) if importable else cls.__name__
    file = None
    if name != cls.__name__:
        _IMPORTABLE.add(name)
        # Declared in a pipeline file loaded from its path (pipelines/loader.py): a step
        # process finds the module by that file.
        file = getattr(sys.modules.get(cls.__module__), "__estflow_file__", None)
    _REGISTRY[name] = cls
    _WRITTEN[cls] = (name, file)
    return cls


def to_dict(value: Any) -> Any:
    """A JSON-ready structure for a declaration (dataclasses, tuples, dicts, scalars)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        kind, file = _WRITTEN.get(type(value), (type(value).__name__, None))
        out: dict[str, Any] = {"kind": kind}
        if file is not None:
            out[FILE_KEY] = file
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
        if cls is None and isinstance(kind, str) and ":" in kind:
            cls = _import_kind(kind, data.get(FILE_KEY))
        if cls is None:
            raise DslError("kind", f"one of {sorted(_REGISTRY)} or 'dict'", kind)
        skip = ("kind", FILE_KEY) if kind in _IMPORTABLE else ("kind",)
        return cls(**{k: from_dict(v) for k, v in data.items() if k not in skip})
    return data


def to_json(value: Any) -> str:
    """Deterministic JSON (sorted keys) of a declaration."""
    return json.dumps(to_dict(value), sort_keys=True, indent=1)


def from_json(text: str) -> Any:
    """Read a declaration back from :func:`to_json` output."""
    return from_dict(json.loads(text))


_A_KIND = "a source kind declared outside estflow, as 'module:ClassName'"


def _import_kind(kind: str, file: Any) -> type:
    """The class ``kind`` (``"module:QualName"``) names, once its module is imported (or
    ``file``, the pipeline file declaring it, is run): it must declare a source kind there."""
    module_name, _, qualname = kind.partition(":")
    if not all(p.isidentifier() for p in (*module_name.split("."), *qualname.split("."))):
        raise DslError("kind", _A_KIND, kind)
    module = _import_module(kind, module_name, file)
    target: Any = module
    for part in qualname.split("."):
        target = getattr(target, part, None)
    if not isinstance(target, type) or _WRITTEN.get(target, ("", None))[0] not in _IMPORTABLE:
        what = "nothing" if target is None else f"a {type(target).__name__}"
        if isinstance(target, type):
            what = f"the class {target.__module__}.{target.__qualname__}"
        note = f"module {module_name!r} holds {what} as {qualname!r}"
        if module_name == "__main__":
            note += ("; a kind declared in a script run as __main__ cannot be imported by a "
                     "step: declare it in a module, or in the pipeline file")
        raise DslError("kind", "a source kind: a dataclass subclassing "
                       "estflow.dsl.sources.Source", kind, note=note)
    return target


def _import_module(kind: str, module_name: str, file: Any):
    if module_name in sys.modules:
        return sys.modules[module_name]
    try:
        return importlib.import_module(module_name)
    except ImportError as err:
        if not isinstance(file, str) or not file:
            raise DslError(
                "kind", "a source kind whose module imports in this process", kind,
                note=f"cannot import module {module_name!r} that declares it: {err}; the "
                     "package that declares it must be installed in this environment/image, "
                     "or its folder on the Python path (PYTHONPATH; a module beside the "
                     "pipeline file imports when estflow runs from that folder), or the kind "
                     "declared in the pipeline file itself") from err
    if not Path(file).is_file():
        raise DslError("kind", "a source kind whose pipeline file is on this machine", kind,
                       note=f"the pipeline file {file!r} that declares it is not here; declare "
                            "the kind in a module installed in this environment/image")
    return _load_file(module_name, file)


def _load_file(name: str, file: str):
    """Run the pipeline ``file`` as module ``name``, as ``estflow run`` loaded it (its folder on
    the path, so the modules beside it import, and ``__estflow_file__`` set)."""
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {file!r}")
    module = importlib.util.module_from_spec(spec)
    module.__estflow_file__ = file
    sys.modules[name] = module
    folder = str(Path(file).parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:  # from the source, never a cached .pyc (which a same-second, same-size edit passes)
        exec(compile(Path(file).read_bytes(), str(file), "exec", dont_inherit=True),
             module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module

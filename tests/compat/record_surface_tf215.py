"""Record tf.estimator 2.15's public surface into ``tf215_surface.json``.

Run it in the TF 2.15 virtual environment (the one ``record_tf215.py`` uses)::

    /root/venv-tf215/bin/python tests/compat/record_surface_tf215.py

It walks ``tf.estimator`` and ``tf.compat.v1.estimator`` and every submodule under them
(``export``, ``inputs``, ``experimental``, ``tpu``, ``tpu.experimental``...) and writes, per public
name (no leading underscore), its path relative to ``tf`` (``estimator.tpu.TPUEstimator``,
``compat.v1.estimator.DNNClassifier``), its kind (``class``, ``function``, ``module``,
``constant``) and, for a class or function, its signature: each parameter's name, kind
(``POSITIONAL_OR_KEYWORD``...) and default as ``repr`` (absent when it has none). A class's
signature is its constructor's. The versions it ran with are recorded too.
``tests/compat/test_surface.py`` checks estflow's engine against the file.
"""

from __future__ import annotations

import inspect
import json
import os
import platform
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
SURFACE = os.path.join(HERE, "tf215_surface.json")
ROOTS = ("estimator", "compat.v1.estimator")


def versions() -> dict:
    from importlib import metadata

    return {"python": platform.python_version(),
            **{name: metadata.version(name) for name in (
                "tensorflow", "tensorflow-estimator", "keras")}}


def _default(value) -> str:
    """A default's repr without the object's address (``<object at 0x...>`` changes per run)."""
    text = repr(value)
    if " at 0x" in text:
        text = text.split(" at 0x")[0] + ">"
    return text


def signature_of(obj) -> list[dict] | None:
    """The parameters of a function, or of a class's constructor (``self`` left out); None
    when Python cannot read one (a builtin)."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    params = []
    for param in sig.parameters.values():
        entry = {"name": param.name, "kind": param.kind.name}
        if param.default is not inspect.Parameter.empty:
            entry["default"] = _default(param.default)
        params.append(entry)
    return params


def kind_of(obj) -> str:
    if isinstance(obj, types.ModuleType):
        return "module"
    if inspect.isclass(obj):
        return "class"
    if callable(obj):
        return "function"
    return "constant"


def walk(module, prefix: str, seen: set[str], out: dict) -> None:
    """Each public name of ``module`` into ``out`` under ``prefix.name``, recursing into
    submodules (each module once per path: ``tf.estimator`` and ``tf.compat.v1.estimator``
    share some)."""
    for name in sorted(dir(module)):
        if name.startswith("_"):
            continue
        obj = getattr(module, name)
        path = f"{prefix}.{name}"
        kind = kind_of(obj)
        entry = {"kind": kind}
        if kind in ("class", "function"):
            entry["signature"] = signature_of(obj)
            entry["defined_in"] = f"{getattr(obj, '__module__', '')}." \
                                  f"{getattr(obj, '__qualname__', name)}"
        elif kind == "constant":
            entry["value"] = _default(obj)
        out[path] = entry
        if kind == "module" and path not in seen:
            seen.add(path)
            walk(obj, path, seen, out)


def main() -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    names: dict = {}
    for root in ROOTS:
        module = tf
        for part in root.split("."):
            module = getattr(module, part)
        names[root] = {"kind": "module"}
        walk(module, root, {root}, names)
    record = {"versions": versions(), "roots": list(ROOTS), "names": names}
    with open(SURFACE, "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)
        f.write("\n")
    counts = {k: sum(1 for v in names.values() if v["kind"] == k)
              for k in ("class", "function", "module", "constant")}
    print(f"{len(names)} names ({counts}) -> {SURFACE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

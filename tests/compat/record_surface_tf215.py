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

Then what a surface of names and signatures cannot show (``surface_behaviour.py``, a tf.estimator
program run here unmodified; ``test_surface.py`` runs it migrated on estflow):

- ``returns``: what ``Estimator.train``/``evaluate``/``predict``/``export_saved_model``/
  ``get_variable_*``..., ``export_savedmodel``, ``experimental_export_all_saved_models`` and
  ``train_and_evaluate`` return, with their types, and what premade Estimators' ``evaluate`` and
  ``predict`` return (``canned``, with the signatures they export);
- ``exports``: the signatures (keys, method names, input and output keys and dtypes) a model_fn
  exports, for each kind of ``predictions`` (a dict, one tensor), of ``export_outputs`` and of
  serving input receiver;
- ``inputs``: the order and batching of ``tf.compat.v1.estimator.inputs.numpy_input_fn`` and
  ``pandas_input_fn`` (every batch, as row numbers, with shuffle=False, over batch sizes and
  num_epochs; the batch sizes and rows read with shuffle=True), and their features' and labels'
  structure and dtypes. TF 1 read them through queues: here in a graph, in a MonitoredSession.

``--only-behaviour`` re-records these (and ``canned``) and keeps ``names`` as they are.
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


def _version(name: str) -> str:
    """A distribution's version (``tensorflow``: ``tensorflow-cpu``'s where that is the one
    installed: the same TensorFlow)."""
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        if name != "tensorflow":
            raise
        return metadata.version("tensorflow-cpu")


def versions() -> dict:
    return {"python": platform.python_version(),
            **{name: _version(name) for name in ("tensorflow", "tensorflow-estimator", "keras")}}


def behaviour_versions() -> dict:
    """The versions the behaviours were recorded with (pandas and numpy matter to inputs)."""
    return {**versions(), **{name: _version(name) for name in ("pandas", "numpy")}}


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


def _read_queue(input_fn, how: str):
    """(batches, dtypes) of a TF 1 queue input_fn, read in a graph as tf.estimator did."""
    import tensorflow as tf
    from surface_behaviour import FOREVER_BATCHES

    batches = []
    with tf.Graph().as_default():
        out = input_fn()
        dtypes = tf.nest.map_structure(lambda t: t.dtype.name, out)
        with tf.compat.v1.train.MonitoredSession() as session:
            try:
                while not how.endswith("first") or len(batches) < FOREVER_BATCHES:
                    batches.append(session.run(out))
            except tf.errors.OutOfRangeError:
                pass
    return batches, dtypes


def record_behaviour() -> dict:
    """``returns``, ``canned``, ``exports`` and ``inputs`` (module docstring)."""
    import tempfile

    sys.path.insert(0, HERE)
    import surface_behaviour as program

    inputs = {}
    for case, (input_fn, how) in program.input_cases().items():
        batches, dtypes = _read_queue(input_fn, how)
        again = _read_queue(input_fn, how)[0] if how == "exact" else None
        inputs[case] = program.summarize(batches, dtypes, how, again)
    with tempfile.TemporaryDirectory() as tmp:
        returns = program.returns(os.path.join(tmp, "returns"))
        canned = program.canned(os.path.join(tmp, "canned"))
        exports = program.exports(os.path.join(tmp, "exports"))
    return {"returns": returns, "canned": canned, "exports": exports, "inputs": inputs}


def main() -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    if sys.argv[1:] == ["--only-behaviour"]:
        with open(SURFACE) as f:
            record = json.load(f)
        assert record["versions"] == versions(), (record["versions"], versions())
        record.update(record_behaviour(), behaviour_versions=behaviour_versions())
        with open(SURFACE, "w") as f:
            json.dump(record, f, indent=1, sort_keys=True)
            f.write("\n")
        return 0
    names: dict = {}
    for root in ROOTS:
        module = tf
        for part in root.split("."):
            module = getattr(module, part)
        names[root] = {"kind": "module"}
        walk(module, root, {root}, names)
    record = {"versions": versions(), "roots": list(ROOTS), "names": names,
              **record_behaviour(), "behaviour_versions": behaviour_versions()}
    with open(SURFACE, "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)
        f.write("\n")
    counts = {k: sum(1 for v in names.values() if v["kind"] == k)
              for k in ("class", "function", "module", "constant")}
    print(f"{len(names)} names ({counts}) -> {SURFACE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

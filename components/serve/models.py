"""Models for ``estflow serve``: discovery under a base path, loading, and hot-swapping.

Layout (TF Serving's, written by :mod:`estflow.components.push`)::

    BASE_PATH/<model_name>/<integer version>/saved_model.pb + variables/ [+ assets.extra/]

A model is a subdirectory of BASE_PATH whose name matches ``[A-Za-z0-9][A-Za-z0-9._-]*`` and
which holds at least one all-digit version directory. Dot-names (``.tmp-*`` push staging,
hidden folders) are never looked at. Like TF Serving's default version policy, only the
highest version of each model is served; a poll picks up a newer one, loads and warms it fully
off the request path, then swaps it in under a lock. If it fails to load, the old version keeps
serving and the failure is logged and reported by the status API (it is retried only when the
version's files change).

Requests never touch the filesystem: they look names up in the in-memory registry, so no URL
can make the server read outside BASE_PATH. Nor can the files: every model directory, version
directory and file is resolved (symlinks followed) and must lie inside the resolved BASE_PATH.
A model directory that resolves outside is refused (404, saying where it points); a version
that does, or holds a file or directory that does, is refused like a version that fails to
load (reported by the status API, the previous version keeps serving). A version is never
walked outside BASE_PATH, so a version symlinked to ``/`` costs one ``stat``. (The check runs
just before a load: a symlink swapped in between the two is not caught; whoever can do that
can write the base path.)
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
from google.protobuf import json_format
from tensorflow.core.protobuf import saved_model_pb2

from estflow.components._io import raw_features
from estflow.components._io.model_repo import version_dirs
from estflow.components.serve.errors import ServingError
from estflow.components.serve.session_model import SessionModel as _SessionTypes
from estflow.components.serve.session_model import load_session

__all__ = ["ServingError", "Signature", "ServedModel", "ModelRegistry", "load_model",
           "read_raw_features", "RAW_FEATURES_FILE", "MODEL_NAME_PATTERN", "PREDICT", "CLASSIFY",
           "REGRESS"]

log = logging.getLogger("estflow.serve")

RAW_FEATURES_FILE = raw_features.TYPES_FILE
read_raw_features = raw_features.read_types
MODEL_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
_INTERNAL_SIGNATURES = ("__saved_model_init_op",)
PREDICT, CLASSIFY, REGRESS = (f"tensorflow/serving/{m}" for m in ("predict", "classify",
                                                                  "regress"))
_TF_BOILERPLATE = ("Graph execution error", "Detected at node", "<stack traces", "[[", "File ")


@dataclasses.dataclass(frozen=True)
class Signature:
    """One callable signature of a loaded SavedModel.

    Attributes:
        function: called with the inputs as keyword arguments (tensors or arrays); returns
            output name -> tensor or array.
        inputs: input name -> TensorSpec (the keyword arguments of ``function``), sorted. A
            spec of unknown rank (the Session path) means the tensor is fed as sent.
        outputs: output names, sorted.
        method_name: the SignatureDef's method name (:data:`PREDICT`, :data:`CLASSIFY`, ...).
    """

    name: str
    function: Callable[..., dict[str, Any]]
    inputs: dict[str, tf.TensorSpec]
    outputs: tuple[str, ...]
    method_name: str = PREDICT


@dataclasses.dataclass(frozen=True)
class ServedModel:
    """A loaded, warmed model version: what a request is served from.

    The inference core is :meth:`predict` / :meth:`classify` / :meth:`regress`: REST and gRPC
    both call them with arrays (they differ only in how they decode requests and encode
    answers), so their answers are equal by construction.

    Attributes:
        signature_defs: the SavedModel's signature defs as TF Serving's metadata JSON.
        raw_features: feature name -> ``"float" | "int" | "string"`` from
            ``assets.extra/estflow_raw_features.json``, or None when the file is absent.
    """

    name: str
    version: int
    path: Path
    signatures: dict[str, Signature]
    signature_defs: dict[str, Any]
    raw_features: dict[str, str] | None
    loaded: Any = dataclasses.field(repr=False)  # keeps the variables the functions capture alive

    def signature(self, name: str | None, method: str = PREDICT) -> Signature:
        """The signature ``name`` (empty or None: :meth:`default_signature` for ``method``)."""
        name = name or self.default_signature(method)
        try:
            return self.signatures[name]
        except KeyError:
            raise ServingError(400, f"model {self.name!r} version {self.version} has no "
                               f"signature {name!r}; available signatures: "
                               f"{', '.join(sorted(self.signatures))}") from None

    def default_signature(self, method: str = PREDICT) -> str:
        """The signature a request that names none gets.

        TF Serving sends every request to ``serving_default``. estflow's ``serving_default``
        is predict-shaped, so a classify/regress request whose ``serving_default`` has another
        method gets the first signature with that method name, else the one named
        ``classify``/``regress``, else ``serving_default``.
        """
        if method == PREDICT or self._method("serving_default") == method:
            return "serving_default"
        for name in self.signatures:
            if self._method(name) == method:
                return name
        short = method.rsplit("/", 1)[-1]
        return short if short in self.signatures else "serving_default"

    def _method(self, name: str) -> str | None:
        return self.signature_defs.get(name, {}).get("method_name")

    def predict(self, signature_name: str | None, inputs: dict[str, Any],
                output_filter: tuple[str, ...] = ()) -> tuple[Signature, dict[str, np.ndarray]]:
        """THE inference core: run a signature on named input arrays.

        Args:
            signature_name: the signature (empty/None: ``serving_default``).
            inputs: input name -> array (or nested lists); converted to the input's dtype.
                Every input of the signature must be given, and nothing else.
            output_filter: output names to return (empty: all of them).

        Returns:
            The signature and output name -> numpy array, sorted by name.

        Raises:
            ServingError: 400 for an unknown signature, input or output, a value that does not
                convert, or an input the model rejects (TensorFlow's message, cleaned).
        """
        signature = self.signature(signature_name, PREDICT)
        missing = sorted(signature.inputs.keys() - inputs.keys())
        unknown = sorted(inputs.keys() - signature.inputs.keys())
        if missing or unknown:
            raise ServingError(400, f"the inputs must be exactly those of signature "
                               f"{signature.name!r} ({', '.join(signature.inputs) or 'none'}); "
                               f"missing: {', '.join(missing) or 'none'}; unknown: "
                               f"{', '.join(unknown) or 'none'}")
        bad = sorted(set(output_filter) - set(signature.outputs))
        if bad:
            raise ServingError(400, f"output {bad[0]!r} is not an output of signature "
                               f"{signature.name!r} (outputs: {', '.join(signature.outputs)})")
        outputs = _call(signature, inputs)
        keep = output_filter or signature.outputs
        return signature, {name: outputs[name] for name in sorted(keep)}

    def _examples(self, signature_name: str | None, serialized: Any,
                  method: str) -> tuple[Signature, dict[str, np.ndarray]]:
        signature = self.signature(signature_name, method)
        spec = next(iter(signature.inputs.values()), None)
        if len(signature.inputs) != 1 or spec.dtype != tf.string:
            raise ServingError(400, f"signature {signature.name!r} cannot serve "
                               f":{method.rsplit('/', 1)[-1]}: it must take a single DT_STRING "
                               "input of serialized tf.Examples (it takes "
                               f"{', '.join(signature.inputs) or 'nothing'})")
        return signature, _call(signature, {next(iter(signature.inputs)): serialized})

    def classify(self, signature_name: str | None,
                 serialized: Any) -> tuple[Signature, list[list[tuple[bytes, float]]]]:
        """Classify serialized tf.Examples: per example, ``(class label, score)`` pairs (label
        ``b""`` when the signature has no ``classes`` output, score 0 without ``scores``)."""
        signature, outputs = self._examples(signature_name, serialized, CLASSIFY)
        return signature, _classes(outputs, signature.name)

    def regress(self, signature_name: str | None,
                serialized: Any) -> tuple[Signature, list[float]]:
        """Regress serialized tf.Examples: one value per example."""
        signature, outputs = self._examples(signature_name, serialized, REGRESS)
        return signature, _values(outputs, signature.name)


def _call(signature: Signature, inputs: dict[str, Any]) -> dict[str, np.ndarray]:
    """Run ``signature``; what the model rejects (TensorFlow's argument errors, a shape a
    function's input signature refuses) is a 400."""
    try:
        args = {name: _as_input(name, value, signature.inputs[name])
                for name, value in inputs.items()}
        outputs = signature.function(**args)
    except (tf.errors.InvalidArgumentError, tf.errors.FailedPreconditionError) as e:
        raise ServingError(400, f"signature {signature.name!r} rejected the input: "
                           f"{_tf_message(e.message)}") from None
    except (TypeError, ValueError) as e:
        raise ServingError(400, f"signature {signature.name!r} rejected the input: "
                           f"{_tf_message(str(e))}") from None
    return {name: np.asarray(value.numpy() if hasattr(value, "numpy") else value)
            for name, value in sorted(outputs.items())}


def _as_input(name: str, value: Any, spec: tf.TensorSpec) -> Any:
    """A tensor of the input's dtype (the object-graph path), or an array of it fed as sent
    (the Session path: a spec of unknown rank)."""
    if spec.shape.rank is None:
        if spec.dtype == tf.string:
            return np.asarray(value, dtype=object)
        return np.asarray(value, dtype=spec.dtype.as_numpy_dtype)
    if not spec.shape.is_compatible_with(np.shape(value)):
        raise ValueError(f"input {name!r}: expected shape {_shape_text(spec.shape)}, got "
                         f"{list(np.shape(value))}")
    return tf.constant(value, dtype=spec.dtype)


def _shape_text(shape: tf.TensorShape) -> str:
    return "[" + ", ".join("-1" if d is None else str(d) for d in shape) + "]"


def _tf_message(message: str) -> str:
    """The useful lines of a TensorFlow op error (not the node/stack-trace boilerplate)."""
    lines = [line.strip() for line in message.splitlines()]
    useful = [line for line in lines if line and not line.startswith(_TF_BOILERPLATE)]
    text = "; ".join(useful) or message.strip()
    return re.sub(r"\s*\[Op:[^\]]*\]$", "", text)[:1000]


def _classes(outputs: dict[str, np.ndarray], signature: str) -> list[list[tuple[bytes, float]]]:
    """``[(class, score), ...]`` per example from the ``classes`` and/or ``scores`` outputs."""
    scores, classes = outputs.get("scores"), outputs.get("classes")
    if scores is None and classes is None:
        raise ServingError(400, f"signature {signature!r} is not a classification signature: "
                           f"it has no 'classes' or 'scores' output (outputs: "
                           f"{', '.join(outputs)})")
    like = scores if scores is not None else classes
    like = like.reshape(len(like), -1)
    scores = (np.zeros(like.shape, np.float32) if scores is None
              else scores.reshape(like.shape))
    labels = (np.full(like.shape, b"", dtype=object) if classes is None
              else classes.reshape(like.shape))
    return [list(zip(row_labels, row_scores, strict=True))
            for row_labels, row_scores in zip(labels.tolist(), scores.tolist(), strict=True)]


def _values(outputs: dict[str, np.ndarray], signature: str) -> list[float]:
    """One value per example from the ``outputs`` output (or the signature's only output)."""
    values = outputs.get("outputs")
    if values is None and len(outputs) == 1:
        (values,) = outputs.values()
    if values is None or values.ndim == 0 or values.size != values.shape[0]:
        raise ServingError(400, f"signature {signature!r} is not a regression signature: it "
                           "needs one 'outputs' output with one value per example (outputs: "
                           f"{', '.join(f'{k} {list(v.shape)}' for k, v in outputs.items())})")
    return values.reshape(-1).tolist()


def _signature_defs(version_dir: Path) -> dict[str, Any]:
    """The SignatureDefs as TF Serving prints them (proto JSON, proto field names)."""
    proto = saved_model_pb2.SavedModel.FromString((version_dir / "saved_model.pb").read_bytes())
    defs = proto.meta_graphs[0].signature_def
    return {name: json_format.MessageToDict(defs[name], preserving_proto_field_name=True,
                                            always_print_fields_with_no_presence=True)
            for name in sorted(defs) if name not in _INTERNAL_SIGNATURES}


def _warm_up(signature: Signature) -> None:
    """Run a signature once on an empty batch, so that graph optimisation happens now rather
    than on the first request; signatures that cannot take an empty batch are left cold."""
    args = {}
    for name, spec in signature.inputs.items():
        if spec.shape.rank is None:
            return
        args[name] = tf.zeros([d if d is not None else 0 for d in spec.shape], spec.dtype)
    try:
        signature.function(**args)
    except Exception as e:  # noqa: BLE001 - warm-up is best effort; real requests report errors
        log.debug("no warm-up for signature %s: %s", signature.name, e)


def load_model(name: str, version: int, version_dir: Path) -> ServedModel:
    """Load, describe and warm up one model version.

    A TF 2 SavedModel (one with an object graph) is loaded with ``tf.saved_model.load``; a
    TF 1 SavedModel, or one that cannot be loaded so, runs in a ``tf.compat.v1.Session`` as in
    TF Serving (:mod:`.session_model`), which feeds tensors as sent.
    """
    raw_features = read_raw_features(version_dir)
    defs = _signature_defs(version_dir)
    if _has_object_graph(version_dir):
        try:
            loaded, signatures = _load_object_graph(version_dir, defs)
        except Exception as e:  # noqa: BLE001 - TF Serving's loader takes what this cannot
            log.info("model %s version %s: tf.saved_model.load failed (%s); serving it through "
                     "a TF 1 Session", name, version, str(e).splitlines()[0][:200])
            loaded = None
    else:
        loaded = None
    if loaded is None:
        loaded, signatures = load_session(version_dir, defs)
    if not signatures:
        raise ValueError(f"the SavedModel version {version} of model {name!r} has no serving "
                         "signatures")
    if not isinstance(loaded, _SessionTypes):  # a Session signature may change state (counter)
        for signature in signatures.values():
            _warm_up(signature)
    return ServedModel(name, version, version_dir, signatures, defs, raw_features, loaded)


def _has_object_graph(version_dir: Path) -> bool:
    proto = saved_model_pb2.SavedModel.FromString((version_dir / "saved_model.pb").read_bytes())
    return bool(proto.meta_graphs[0].object_graph_def.nodes)


def _load_object_graph(version_dir: Path, defs: dict[str, Any]) -> tuple[Any, dict]:
    loaded = tf.saved_model.load(str(version_dir))
    signatures = {}
    for key, function in loaded.signatures.items():
        _args, kwargs = function.structured_input_signature
        method = defs.get(key, {}).get("method_name") or PREDICT
        signatures[key] = Signature(key, function, dict(sorted(kwargs.items())),
                                    tuple(sorted(function.structured_outputs)), method)
    return loaded, signatures


class _Outside(Exception):
    """A path that resolves outside the base path (the message says where)."""


def _inside(path: Path | str, base: Path) -> Path:
    """``path`` resolved; :class:`_Outside` unless it lies in ``base`` (resolved)."""
    real = Path(os.path.realpath(path))
    if not real.is_relative_to(base):
        raise _Outside(f"{path} resolves to {real}, outside the base path {base}")
    return real


def _scan(base_path: Path) -> tuple[dict[str, dict[int, Path]], dict[str, str]]:
    """(model name -> {version: directory} for every model under ``base_path``, model name ->
    why it is refused for model directories that resolve outside it)."""
    found, refused = {}, {}
    for child in sorted(base_path.iterdir()):
        if child.name.startswith(".") or not child.is_dir():
            continue
        if not MODEL_NAME_PATTERN.fullmatch(child.name):
            log.debug("ignoring %s: not a valid model name", child)
            continue
        try:
            _inside(child, base_path)
        except _Outside as e:
            refused[child.name] = str(e)
            continue
        versions = version_dirs(child)
        if versions:
            found[child.name] = versions
    return found, refused


def _inspect(folder: Path, base: Path) -> tuple:
    """Check that nothing in a version directory resolves outside ``base`` (raises
    :class:`_Outside` at the first such path, before descending into it); return a cheap
    identity of its files, to retry a failed load only when they change. Symlinks inside
    ``base`` are followed, each real directory walked once."""
    root = _inside(folder, base)
    seen = {root}
    entries = []
    for here, dirs, files in os.walk(root, followlinks=True):
        for name in list(dirs):
            path = os.path.join(here, name)
            if os.path.islink(path):
                real = _inside(path, base)
                if real in seen:
                    dirs.remove(name)
                seen.add(real)
        for name in files:
            path = os.path.join(here, name)
            if os.path.islink(path):
                _inside(path, base)
            try:
                stat = os.stat(path)
            except OSError:
                continue
            entries.append((os.path.relpath(path, root), stat.st_size, stat.st_mtime_ns))
    return tuple(sorted(entries))


@dataclasses.dataclass(frozen=True)
class _Failure:
    fingerprint: tuple
    message: str


class ModelRegistry:
    """The served models: the latest loadable version of each model under ``base_path``.

    ``refresh()`` scans the base path once (the poll thread calls it every ``poll_seconds``);
    request threads call ``get()``/``status()``, which only read an immutable snapshot.
    """

    def __init__(self, base_path: Path, *, loader: Callable[..., ServedModel] = load_model,
                 sync: Callable[[], object] | None = None, source: str | None = None):
        self.base_path = base_path
        self.source = source or str(base_path)  # what messages name (a bucket's URI)
        self._sync = sync  # copies a bucket's new versions into base_path before each scan
        self._loader = loader
        self._lock = threading.Lock()          # guards the swap of _models / _failures
        self._refresh_lock = threading.Lock()  # one scan-and-load at a time
        self._models: dict[str, ServedModel] = {}
        self._refused: dict[str, str] = {}  # model name -> why its directory is not read
        self._failures: dict[tuple[str, int], _Failure] = {}
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None

    def models(self) -> list[ServedModel]:
        with self._lock:
            return [self._models[name] for name in sorted(self._models)]

    def get(self, name: str, version: int | None = None) -> ServedModel:
        """The served model, or a 404 :class:`ServingError` saying why there is none."""
        with self._lock:
            model = self._models.get(name)
            failures = {v: f for (n, v), f in self._failures.items() if n == name}
        if model is None:
            with self._lock:
                refused = self._refused.get(name)
            if refused is not None:
                raise ServingError(404, f"model {name!r} is not served: {refused}")
            if failures:
                newest = max(failures)
                raise ServingError(404, f"model {name!r} is not available: version {newest} "
                                   f"failed to load: {failures[newest].message}")
            raise ServingError(404, f"no model named {name!r} is served from "
                               f"{self.source}; served models: "
                               f"{', '.join(m.name for m in self.models()) or 'none'}")
        if version is not None and version != model.version:
            reason = (f"it failed to load: {failures[version].message}" if version in failures
                      else "only the latest version of a model is served")
            raise ServingError(404, f"model {name!r} version {version} is not served ({reason});"
                               f" the served version is {model.version}")
        return model

    def status(self, name: str, version: int | None = None) -> list[dict[str, Any]]:
        """TF Serving's ``model_version_status`` entries: the served version (AVAILABLE) and
        versions that failed to load (END with the error), newest first."""
        with self._lock:
            model = self._models.get(name)
            failures = {v: f for (n, v), f in self._failures.items() if n == name}
        entries = {v: _version_status(v, "END", "UNKNOWN", f.message)
                   for v, f in failures.items()}
        if model is not None:
            entries[model.version] = _version_status(model.version, "AVAILABLE", "OK", "")
        if version is not None:
            if version not in entries:
                self.get(name, version)  # raises the 404 that explains what is served
            entries = {version: entries[version]}
        if not entries:
            self.get(name)  # raises 404: unknown model
        return [entries[v] for v in sorted(entries, reverse=True)]

    def refresh(self) -> None:
        """Scan the base path; load each model's newest version if it is not served yet."""
        with self._refresh_lock:
            if self._sync is not None:
                try:
                    self._sync()
                except OSError as e:  # the bucket is unreachable now: keep serving the copy
                    log.error("cannot copy new versions from %s (serving what was copied "
                              "before): %s", self.source, e)
            try:
                found, refused = _scan(self.base_path)
            except OSError as e:
                log.error("cannot scan %s: %s", self.base_path, e)
                return
            for name, reason in refused.items():
                if self._refused.get(name) != reason:
                    log.error("refusing model %s: %s (nothing outside the base path is read)",
                              name, reason)
            for name, versions in found.items():
                self._refresh_model(name, versions)
            with self._lock:
                self._refused = refused
                for name in set(self._models) - set(found):
                    if name not in refused:
                        log.warning("model %s has no versions left under %s; no longer served",
                                    name, self.base_path)
                    del self._models[name]
                self._failures = {key: f for key, f in self._failures.items()
                                  if key[1] in found.get(key[0], {})}

    def _refresh_model(self, name: str, versions: dict[int, Path]) -> None:
        latest = max(versions)
        with self._lock:
            current = self._models.get(name)
            failure = self._failures.get((name, latest))
        if current is not None and current.version == latest:
            return
        still = f"; still serving version {current.version}" if current else ""
        try:
            fingerprint = _inspect(versions[latest], self.base_path)
        except _Outside as e:
            message = f"refused: {e}"
            if failure is None or failure.message != message:
                log.error("model %s version %s %s (nothing outside the base path is read)%s",
                          name, latest, message, still)
                with self._lock:
                    self._failures[(name, latest)] = _Failure(("outside", message), message)
            return
        if failure is not None and failure.fingerprint == fingerprint:
            return
        try:
            model = self._loader(name, latest, versions[latest])
        except Exception as e:  # noqa: BLE001 - any load failure keeps the old version serving
            message = f"{type(e).__name__}: {e}".splitlines()[0][:500]
            log.error("model %s version %s failed to load from %s: %s%s", name, latest,
                      versions[latest], message, still)
            with self._lock:
                self._failures[(name, latest)] = _Failure(fingerprint, message)
            return
        with self._lock:
            self._models[name] = model
            self._failures.pop((name, latest), None)
        log.info("serving model %s version %s%s", name, latest,
                 f" (replacing version {current.version})" if current else "")

    def start_polling(self, poll_seconds: float) -> None:
        """Refresh every ``poll_seconds`` in a daemon thread until :meth:`stop`."""
        def loop() -> None:
            while not self._stop.wait(poll_seconds):
                try:
                    self.refresh()
                except Exception:  # noqa: BLE001 - the poller must outlive one bad scan
                    log.exception("model refresh failed")

        self._poller = threading.Thread(target=loop, name="estflow-serve-poll", daemon=True)
        self._poller.start()

    def stop(self) -> None:
        self._stop.set()
        if self._poller is not None:
            self._poller.join()


def _version_status(version: int, state: str, code: str, message: str) -> dict[str, Any]:
    return {"version": str(version), "state": state,
            "status": {"error_code": code, "error_message": message}}

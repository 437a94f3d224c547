"""TF 1 SavedModels served as TF Serving serves them: in a ``tf.compat.v1.Session``.

``tf.saved_model.load`` rebuilds a TF 1 SavedModel as pruned functions whose input signatures
come from the SignatureDef's TensorInfo shapes, and it refuses graphs it cannot wrap (reference
variables, a TensorInfo shape the graph contradicts, as in TF Serving's
``saved_model_half_plus_three``). TF Serving's loader ignores those shapes: it imports the
MetaGraph into a Session and feeds each input tensor as sent. This module does the same, with
a callable made from ``CallableOptions`` (the C++ path, which feeds without Python's static
shape check); a tensor the graph cannot take is refused by the graph (a 400 upstream).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import config_pb2
from tensorflow.core.protobuf import saved_model_pb2

from estflow.components.serve.signature import PREDICT
from estflow.components.serve.signature import Signature

__all__ = ["SessionModel", "load_session"]

_SERVE_TAG = "serve"


class SessionModel:
    """A SavedModel's MetaGraph loaded into its own graph and Session (kept open while the
    version is served; the Session is closed when the last reference goes)."""

    def __init__(self, version_dir: Path) -> None:
        self.graph = tf.Graph()
        self.session = tf.compat.v1.Session(graph=self.graph)
        with self.graph.as_default():
            tf.compat.v1.saved_model.loader.load(self.session, [_serve_tags(version_dir)[0]],
                                                 str(version_dir))
        self._lock = threading.Lock()  # making a callable mutates the Session's state

    def callable(self, feeds: list[str], fetches: list[str]):
        """``fn(*arrays) -> [arrays]`` running the graph from the named feeds to the fetches."""
        with self._lock:
            return self.session._make_callable_from_options(  # noqa: SLF001 - the C++ feed path
                config_pb2.CallableOptions(feed=feeds, fetch=fetches))

    def __del__(self) -> None:
        try:
            self.session.close()
        except Exception:  # noqa: BLE001, S110 - interpreter shutdown
            pass


def _serve_tags(version_dir: Path) -> list[str]:
    """The MetaGraph's tags: the one tagged ``serve`` (TF Serving's default), else the first."""
    proto = saved_model_pb2.SavedModel.FromString((version_dir / "saved_model.pb").read_bytes())
    tag_sets = [list(m.meta_info_def.tags) for m in proto.meta_graphs]
    return next((tags for tags in tag_sets if _SERVE_TAG in tags), tag_sets[0])


def load_session(version_dir: Path, defs: dict[str, Any]) -> tuple[SessionModel, dict]:
    """The model in a Session and its signatures (:class:`~.signature.Signature`), from ``defs``
    (the SignatureDefs as JSON, see ``models._signature_defs``)."""
    model = SessionModel(version_dir)
    signatures = {}
    for key, sig in defs.items():
        inputs = dict(sorted(sig.get("inputs", {}).items()))
        outputs = dict(sorted(sig.get("outputs", {}).items()))
        specs = {name: tf.TensorSpec(None, tf.dtypes.as_dtype(
            _dtype_enum(info["dtype"])), name) for name, info in inputs.items()}
        run = model.callable([info["name"] for info in inputs.values()],
                             [info["name"] for info in outputs.values()])
        signatures[key] = Signature(key, _function(run, list(inputs), list(outputs)), specs,
                                    tuple(outputs), sig.get("method_name") or PREDICT)
    return model, signatures


def _dtype_enum(name: str) -> int:
    from tensorflow.core.framework import types_pb2

    return types_pb2.DataType.Value(name)


def _function(run, inputs: list[str], outputs: list[str]):
    """Keyword arguments (input aliases) -> {output alias: array}."""
    def function(**arrays: np.ndarray) -> dict[str, np.ndarray]:
        values = run(*(arrays[name] for name in inputs))
        return dict(zip(outputs, values, strict=True))

    return function

"""SavedModel export: serving signatures over the trained model, written atomically.

TF 2 has no placeholders, so estflow's ``serving_input_receiver_fn`` returns a
:class:`ServingInputReceiver` describing the signature's inputs (``receiver_specs``) and how to
turn them into the model_fn's features (``features_fn``, traced inside the signature). Objects
the features_fn uses that own resources (a tf.Transform layer and its tables, vocabularies)
go in ``trackables`` so the SavedModel carries them. tf.estimator's forms work too:
``build_parsing_serving_input_receiver_fn``, ``build_raw_serving_input_receiver_fn``, and
``ServingInputReceiver(features, receiver_tensors)`` / ``TensorServingInputReceiver`` built from
``tf.compat.v1.placeholder``s (:func:`resolve_receiver` runs such a fn in a TF 1 graph).

Signatures are traced on a plain ``tf.Module`` that tracks only what serving needs: the model
variables (no optimizer slots) and the trackables. TF 2's ``tf.saved_model.save`` writes every
signature with the predict method name; :func:`save` rewrites the method names given to it
(e.g. ``tensorflow/serving/classify``) in ``saved_model.pb`` so TF Serving's Classify and
Regress APIs accept them.

``EstimatorSpec.export_outputs`` (PREDICT mode) names the signatures, as in tf.estimator:
``{"serving_default": ClassificationOutput(scores, classes), "classification": ...,
"predict": PredictOutput(outputs)}`` (the heads, hence the premade Estimators, set exactly
that; the binary head adds ``"regression"``, a ``RegressionOutput`` of the logistic;
regression heads a ``RegressionOutput``). One output under another key is also
``serving_default``; several with none named so fail, as in tf.estimator. A ``PredictOutput``
signature takes the receiver's inputs and returns its dict, or a lone tensor as ``output``; a
classification signature returns ``classes``/``scores``, a regression one ``outputs``, and
both take one string tensor ``inputs`` (serialized ``tf.Example``s, TF Serving's
Classify/Regress request), so need a receiver with exactly one string input; with another
receiver they are left out, as in tf.estimator. Where that leaves no ``serving_default``
(tf.estimator then wrote none) estflow's falls back to ``predict``, else all predictions.
Without ``export_outputs``, ``serving_default`` returns all predictions (a lone tensor as
``output``). ``tests/compat/test_surface.py`` checks these keys against tf.estimator 2.15's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.trackable import resource as resource_lib

__all__ = ["ServingInputReceiver", "TensorServingInputReceiver",
           "parsing_serving_input_receiver_fn", "build_parsing_serving_input_receiver_fn",
           "build_raw_serving_input_receiver_fn", "resolve_receiver", "export_module", "save",
           "export_saved_model", "copy_assets_extra", "as_outputs", "predict_outputs",
           "signature_function", "ClassificationOutput", "RegressionOutput", "PredictOutput",
           "CLASSIFY", "REGRESS"]

CLASSIFY = "tensorflow/serving/classify"
REGRESS = "tensorflow/serving/regress"
_SERVING_INPUTS = "inputs"  # the input name of TF Serving's Classify and Regress signatures


@dataclasses.dataclass(frozen=True)
class ClassificationOutput:
    """A classification signature (tf.estimator.export.ClassificationOutput): ``scores``
    (float ``[batch, n]``) and/or ``classes`` (string ``[batch, n]``)."""

    scores: Any = None
    classes: Any = None

    def __post_init__(self) -> None:
        if self.scores is None and self.classes is None:
            raise ValueError("ClassificationOutput needs scores, classes or both; received "
                             "neither")

    def outputs(self) -> dict[str, Any]:
        return {k: v for k, v in (("scores", self.scores), ("classes", self.classes))
                if v is not None}


@dataclasses.dataclass(frozen=True)
class RegressionOutput:
    """A regression signature (tf.estimator.export.RegressionOutput): ``value``, float
    ``[batch]`` or ``[batch, 1]``, returned as ``outputs``."""

    value: Any

    def outputs(self) -> dict[str, Any]:
        return {"outputs": self.value}


@dataclasses.dataclass(frozen=True)
class PredictOutput:
    """A predict signature (tf.estimator.export.PredictOutput): a tensor or a dict of them."""

    value: Any

    def outputs(self) -> dict[str, Any]:
        return predict_outputs(self.value)


_METHODS = {ClassificationOutput: CLASSIFY, RegressionOutput: REGRESS}


_DEFAULT_KEY = "serving_default"
_SINGLE_FEATURE = "feature"  # tf.estimator's names for a lone features / receiver tensor
_SINGLE_RECEIVER = "input"


class ServingInputReceiver:
    """The inputs of a serving signature and how they become features.

    Two forms:

    - estflow's (TF 2): ``ServingInputReceiver(features_fn, receiver_specs, trackables={})``;
    - tf.estimator's (TF 1): ``ServingInputReceiver(features, receiver_tensors)`` built by a
      ``serving_input_receiver_fn`` from ``tf.compat.v1.placeholder``s (``receiver_tensors``)
      and the ops turning them into ``features``. The export calls such a fn inside a TF 1
      graph (``tf.compat.v1.wrap_function``) and keeps the ops between the placeholders and
      the features as the signature's ``features_fn`` (:func:`resolve_receiver`). A lone
      features tensor becomes ``{"feature": tensor}``, a lone receiver tensor
      ``{"input": tensor}``, as in tf.estimator.

    Args:
        features_fn: receiver tensors (a dict keyed like ``receiver_specs``) -> the model_fn's
            features; runs inside the signature's trace.
        receiver_specs: ``{input name: tf.TensorSpec}``, the signature's inputs.
        trackables: objects ``features_fn`` uses that the SavedModel must carry (layers with
            lookup tables, assets).
        features: (TF 1 form) a tensor or a dict of tensors (or ``SparseTensor``s): the
            model_fn's features.
        receiver_tensors: (TF 1 form) a placeholder or a dict of them: the signature's inputs.
        receiver_tensors_alternatives: (TF 1 form) must be None: one signature per receiver.

    Raises:
        ValueError: neither form, or ``receiver_tensors_alternatives``.
    """

    _single_feature = False  # TensorServingInputReceiver: a lone tensor stays one

    def __init__(self, features_fn=None, receiver_specs=None, trackables=None, *,
                 features=None, receiver_tensors=None,
                 receiver_tensors_alternatives=None) -> None:
        if features_fn is not None and not callable(features_fn):  # TF 1, positionally
            if features is not None or receiver_tensors is not None:
                raise ValueError("ServingInputReceiver: expected (features_fn, receiver_specs) "
                                 "or (features, receiver_tensors); received both")
            features, receiver_tensors, features_fn = features_fn, receiver_specs, None
            receiver_specs, receiver_tensors_alternatives = None, trackables
            trackables = None
        self.features_fn = features_fn
        self.receiver_specs = dict(receiver_specs or {})
        self.trackables = dict(trackables or {})
        self.features = features
        self.receiver_tensors = receiver_tensors
        if receiver_tensors_alternatives:
            raise ValueError("ServingInputReceiver: receiver_tensors_alternatives (extra "
                             "signatures) are not supported; export each receiver with its "
                             "own serving_input_receiver_fn. Received: "
                             f"{sorted(receiver_tensors_alternatives)}")
        if features_fn is None and (features is None or receiver_tensors is None):
            raise ValueError("ServingInputReceiver needs features_fn and receiver_specs "
                             "(estflow) or features and receiver_tensors (tf.estimator); "
                             f"received features_fn={features_fn!r}, features={features!r}, "
                             f"receiver_tensors={receiver_tensors!r}")
        if features_fn is not None and not self.receiver_specs:
            raise ValueError("ServingInputReceiver(features_fn, receiver_specs): expected "
                             "receiver_specs, a non-empty {name: tf.TensorSpec}; received "
                             f"{receiver_specs!r}")

    @property
    def is_tf1(self) -> bool:
        """Built from TF 1 tensors (to be resolved by :func:`resolve_receiver`)."""
        return self.features_fn is None

    def _tf1_parts(self) -> tuple[dict, Any]:
        """(receiver tensors by name, features) with tf.estimator's default names."""
        receivers = self.receiver_tensors
        if not isinstance(receivers, Mapping):
            receivers = {_SINGLE_RECEIVER: receivers}
        features = self.features
        if not isinstance(features, Mapping) and not self._single_feature:
            features = {_SINGLE_FEATURE: features}
        return dict(receivers), features


class TensorServingInputReceiver(ServingInputReceiver):
    """tf.estimator's ``TensorServingInputReceiver(features, receiver_tensors)``: like
    :class:`ServingInputReceiver`'s TF 1 form, but a lone features tensor reaches the model_fn
    as that tensor, not as ``{"feature": tensor}``."""

    _single_feature = True

    def __init__(self, features, receiver_tensors, receiver_tensors_alternatives=None) -> None:
        super().__init__(features=features, receiver_tensors=receiver_tensors,
                         receiver_tensors_alternatives=receiver_tensors_alternatives)


def resolve_receiver(serving_input_receiver_fn: Callable[[], Any]) -> ServingInputReceiver:
    """Call ``serving_input_receiver_fn`` and return its receiver in estflow's form.

    A fn building a TF 1 receiver (placeholders: they fail when called eagerly) is called
    again inside a TF 1 graph, and the ops from its receiver tensors to its features become
    the ``features_fn``."""
    try:
        receiver = serving_input_receiver_fn()
    except RuntimeError as err:
        if "placeholder" not in str(err):
            raise
        receiver = None
    if receiver is not None and not getattr(receiver, "is_tf1", False):
        return receiver
    box: dict[str, Any] = {}

    def build():
        box["receiver"] = serving_input_receiver_fn()

    graph_fn = tf.compat.v1.wrap_function(build, [])
    receiver = box["receiver"]
    if not getattr(receiver, "is_tf1", False):
        raise TypeError("serving_input_receiver_fn returned a receiver without features_fn "
                        f"in a TF 1 graph: {type(receiver).__name__}")
    receivers, features = receiver._tf1_parts()
    names = sorted(receivers)
    feeds = [receivers[n] for n in names]
    for name, tensor in zip(names, feeds, strict=True):
        if not isinstance(tensor, tf.Tensor):
            raise TypeError(f"receiver_tensors[{name!r}]: expected a tf.compat.v1.placeholder "
                            f"(a dense tensor); received {type(tensor).__name__}")
    pruned = graph_fn.prune(feeds=feeds, fetches=features)
    specs = {n: tf.TensorSpec(t.shape, t.dtype, name=n) for n, t in zip(names, feeds,
                                                                          strict=True)}
    return ServingInputReceiver(
        features_fn=lambda inputs: pruned(*[inputs[n] for n in names]),
        receiver_specs=specs)


def _parsing_receiver_fn(feature_spec: Mapping[str, Any], name: str,
                         batch_size: int | None) -> Callable[[], ServingInputReceiver]:
    spec = dict(feature_spec)

    def receiver_fn() -> ServingInputReceiver:
        return ServingInputReceiver(
            features_fn=lambda inputs: tf.io.parse_example(inputs[name], spec),
            receiver_specs={name: tf.TensorSpec([batch_size], tf.string, name=name)})

    return receiver_fn


def parsing_serving_input_receiver_fn(feature_spec: Mapping[str, Any],
                                      name: str = "examples") -> Callable[[], ServingInputReceiver]:
    """A receiver fn taking serialized ``tf.Example``s (string ``[None]``) parsed with
    ``feature_spec`` (tf.estimator's ``build_parsing_serving_input_receiver_fn``)."""
    return _parsing_receiver_fn(feature_spec, name, None)


def build_parsing_serving_input_receiver_fn(
        feature_spec: Mapping[str, Any],
        default_batch_size: int | None = None) -> Callable[[], ServingInputReceiver]:
    """tf.estimator's name: a receiver fn taking serialized ``tf.Example``s as ``examples``
    (string ``[default_batch_size]``), parsed with ``feature_spec``."""
    return _parsing_receiver_fn(feature_spec, "examples", default_batch_size)


def build_raw_serving_input_receiver_fn(
        features: Mapping[str, Any],
        default_batch_size: int | None = None) -> Callable[[], ServingInputReceiver]:
    """tf.estimator's raw receiver: the signature takes each feature as an input of the same
    name, fed to the model_fn as is. ``features`` maps names to anything with a ``dtype`` and
    a ``shape`` (a tensor, a ``tf.TensorSpec``, a numpy array): the first dimension becomes
    ``default_batch_size`` (None: any batch size); a scalar becomes a batch of scalars, as in
    tf.estimator.

    Raises:
        TypeError: ``features`` is not a dict of such values.
    """
    if not isinstance(features, Mapping) or not features:
        raise TypeError("build_raw_serving_input_receiver_fn: expected features, a non-empty "
                        f"dict of tensors or tf.TensorSpecs; received {type(features).__name__}")
    specs = {}
    for name, value in features.items():
        if not (hasattr(value, "dtype") and hasattr(value, "shape")):
            raise TypeError(f"build_raw_serving_input_receiver_fn: features[{name!r}] is a "
                            f"{type(value).__name__}; expected a tensor or a tf.TensorSpec")
        shape = tf.TensorShape(value.shape)
        if shape.rank is not None:  # a scalar too: [batch] (tf.estimator's shape[1:] of [])
            shape = tf.TensorShape([default_batch_size]).concatenate(shape[1:])
        specs[name] = tf.TensorSpec(shape, tf.as_dtype(value.dtype), name=name)

    def receiver_fn() -> ServingInputReceiver:
        return ServingInputReceiver(features_fn=dict, receiver_specs=specs)

    return receiver_fn


_SINGLE_OUTPUT = "output"  # tf.estimator's PredictOutput name for a lone tensor


def as_outputs(predictions, single: str = "predictions") -> dict[str, tf.Tensor]:
    """Signature outputs from predictions: a dict as is, a single tensor under ``single``
    (the pipeline's export, components/train: ``predictions``; :func:`export_saved_model`
    passes tf.estimator's ``output``)."""
    if isinstance(predictions, Mapping):
        return dict(predictions)
    return {single: predictions}


def predict_outputs(predictions) -> dict[str, tf.Tensor]:
    """tf.estimator's ``PredictOutput(predictions).outputs``: a dict as is, a single tensor as
    ``output`` (hence the default ``serving_default`` of a model_fn whose ``predictions`` is
    one tensor)."""
    return as_outputs(predictions, _SINGLE_OUTPUT)


def signature_function(fn: Callable[[dict], dict], input_specs: Mapping[str, tf.TensorSpec]):
    """A concrete function whose inputs are named like ``input_specs``'s keys (the
    SignatureDef input names) calling ``fn(inputs_dict)``."""

    def signature(**inputs):
        return fn(inputs)

    return tf.function(signature, autograph=False).get_concrete_function(**dict(input_specs))


def export_module(estimator, trackables: Mapping[str, Any] | None = None) -> tf.Module:
    """A module to hang signatures on; call :func:`save` after tracing them (it then tracks
    the serving variables, which the traces may have created)."""
    module = tf.Module(name="export")
    module.assets = dict(trackables or {})
    return module


_UNTRACKED_TABLE = (
    "The serving signature uses a lookup table the SavedModel cannot carry: {table}. Tables a "
    "model_fn builds over a vocabulary file (tf.lookup.TextFileInitializer: "
    "index_table_from_file's TF 2 form) are carried; this one is not (keys from tensors, a "
    "table created once and captured, or a tf.compat.v1.feature_column lookup): build it in "
    "a tf.Module passed as a ServingInputReceiver trackable, or read the keys from a "
    "vocabulary file; for feature columns, estflow.estimator.feature_column's lookups are "
    "constant ops.")


@contextlib.contextmanager
def carried_tables(module: tf.Module):
    """Attach to ``module`` the vocabulary-file lookup tables (``tf.lookup.StaticHashTable``,
    ``StaticVocabularyTable`` over a ``TextFileInitializer``) created while signatures trace
    inside this block, so the SavedModel carries them with their files as assets
    (tf.estimator's graph kept a model_fn's tables in ``TABLE_INITIALIZERS``; a TF 2 trace
    keeps none)."""
    tracker = resource_lib.ResourceTracker()
    with resource_lib.resource_tracker_scope(tracker):
        yield
    # Only vocabulary-file tables: their initializer (a file, saved as an asset) is rebuilt
    # at load. A table from in-graph keys (KeyValueTensorInitializer over the trace's
    # tensors, tf.feature_column's lists) would load empty and serve wrong ids silently:
    # left untracked, the save fails naming it.
    tables = [r for r in tracker.resources
              if isinstance(getattr(r, "_initializer", None), tf.lookup.TextFileInitializer)]
    if tables:
        module.lookup_tables = [*getattr(module, "lookup_tables", []), *tables]


def _untracked_table(err: AssertionError) -> ValueError:
    found = re.search(r'ResourceHandle\(name="([^"]*)"', str(err))
    table = f"resource {found.group(1)!r}" if found else "a lookup table"
    return ValueError(_UNTRACKED_TABLE.format(table=table))


def _patch_method_names(export_dir: Path, method_names: Mapping[str, str]) -> None:
    path = export_dir / "saved_model.pb"
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString(path.read_bytes())
    for meta_graph in proto.meta_graphs:
        for name, method in method_names.items():
            if name in meta_graph.signature_def:
                meta_graph.signature_def[name].method_name = method
    path.write_bytes(proto.SerializeToString())
    # The fingerprint hashes saved_model.pb; it is optional (SavedModels before TF 2.12 have
    # none), so drop the stale one rather than ship a wrong checksum.
    (export_dir / "fingerprint.pb").unlink(missing_ok=True)


def save(module: tf.Module, estimator, export_dir: str | os.PathLike,
         signatures: Mapping[str, Any], method_names: Mapping[str, str] | None = None,
         checkpoint_path: str | None = None) -> Path:
    """Write ``module`` with ``signatures`` (tf.functions with input signatures, or concrete
    functions) to ``export_dir`` atomically: into a temporary sibling, then renamed.

    Raises:
        FileExistsError: ``export_dir`` exists.
    """
    target = Path(export_dir)
    if target.exists():
        raise FileExistsError(f"export directory {target} already exists")
    target.parent.mkdir(parents=True, exist_ok=True)
    with carried_tables(module):
        concrete = {name: fn.get_concrete_function() if hasattr(fn, "get_concrete_function")
                    else fn for name, fn in signatures.items()}
    module.model_variables = list(estimator.serving_variables())
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        with estimator.weights(checkpoint_path):
            try:
                tf.saved_model.save(module, str(tmp), signatures=concrete)
            except AssertionError as err:
                if "untracked" in str(err) and "LookupInterface" in str(err):
                    raise _untracked_table(err) from err
                raise
        if method_names:
            _patch_method_names(tmp, method_names)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _string_input(receiver: ServingInputReceiver) -> str | None:
    """The receiver's one string input (what Classify/Regress signatures feed), if it has
    exactly one input and it is a string."""
    specs = dict(receiver.receiver_specs)
    if len(specs) == 1:
        (name, spec), = specs.items()
        if spec.dtype == tf.string:
            return name
    return None


def _export_signatures(estimator, receiver: ServingInputReceiver,
                       progress: Callable[[str], None]) -> tuple[dict, dict]:
    """(signatures, method names) for the PREDICT spec's ``export_outputs`` (module
    docstring)."""
    kinds: dict[str, type] = {}

    def everything(inputs):
        spec = estimator.predict_spec(receiver.features_fn(inputs))
        kinds.update({k: type(v) for k, v in (spec.export_outputs or {}).items()})
        return predict_outputs(spec.predictions)

    predict_all = signature_function(everything, receiver.receiver_specs)
    if not kinds:
        return {"serving_default": predict_all}, {}
    default = _default_key(kinds)
    unknown = {k: t.__name__ for k, t in kinds.items()
               if t not in (ClassificationOutput, RegressionOutput, PredictOutput)}
    if unknown:
        raise TypeError(f"Expected export_outputs values to be ClassificationOutput, "
                        f"RegressionOutput or PredictOutput (estflow.estimator); "
                        f"received {unknown}")
    string_input = _string_input(receiver)
    signatures, methods = {}, {}
    if default != _DEFAULT_KEY:  # one output under another name: also serving_default
        kinds[_DEFAULT_KEY] = kinds[default]
    for key, kind in sorted(kinds.items()):
        source = default if key == _DEFAULT_KEY else key
        if kind is PredictOutput:
            signatures[key] = signature_function(
                lambda inputs, source=source: estimator.predict_spec(
                    receiver.features_fn(inputs)).export_outputs[source].outputs(),
                receiver.receiver_specs)
            continue
        if string_input is None:
            progress(f"export: left out signature {key!r} ({kind.__name__}): it takes one "
                     "string tensor of serialized tf.Examples, and the receiver's inputs are "
                     f"{sorted(receiver.receiver_specs)}")
            continue
        signatures[key] = signature_function(
            lambda inputs, source=source: estimator.predict_spec(receiver.features_fn(
                {string_input: inputs[_SERVING_INPUTS]})).export_outputs[source].outputs(),
            {_SERVING_INPUTS: tf.TensorSpec([None], tf.string, name=_SERVING_INPUTS)})
        methods[key] = _METHODS[kind]
    if _DEFAULT_KEY not in signatures:  # estflow's: tf.estimator then wrote no default
        signatures[_DEFAULT_KEY] = signatures.get("predict", predict_all)
        methods.pop(_DEFAULT_KEY, None)
    return signatures, methods


def copy_assets_extra(export_dir: str | os.PathLike, assets_extra: Mapping[str, str] | None
                      ) -> None:
    """Copy ``{path under assets.extra/: source file}`` into ``export_dir/assets.extra``
    (tf.estimator's ``assets_extra``)."""
    for destination, source in (assets_extra or {}).items():
        target = os.path.join(os.fsdecode(export_dir), "assets.extra", os.fsdecode(destination))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.fsdecode(source), target)


def _default_key(kinds: Mapping[str, type]) -> str:
    """The ``export_outputs`` key ``serving_default`` serves, as tf.estimator chose it: that
    key, or the only output's.

    Raises:
        ValueError: several outputs, none named ``serving_default`` (tf.estimator's error).
    """
    if _DEFAULT_KEY in kinds:
        return _DEFAULT_KEY
    if len(kinds) == 1:
        return next(iter(kinds))
    raise ValueError("Multiple export_outputs were provided, but none of them is specified as "
                     "the default. Do this by naming one of them with "
                     f"signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY ('{_DEFAULT_KEY}'"
                     f"); received export_outputs keys {sorted(kinds)}")


def export_saved_model(estimator, export_dir_base: str | os.PathLike,
                       serving_input_receiver_fn: Callable[[], ServingInputReceiver],
                       checkpoint_path: str | None = None,
                       progress: Callable[[str], None] | None = None) -> str:
    """The model's signatures (its PREDICT spec's ``export_outputs``, else
    ``serving_default`` returning all predictions; see the module docstring) under
    ``export_dir_base/<unix timestamp>``, like tf.estimator's export layout."""
    receiver = resolve_receiver(serving_input_receiver_fn)
    module = export_module(estimator, receiver.trackables)
    with carried_tables(module):  # the tables the model_fn builds as the signatures trace
        signatures, methods = _export_signatures(estimator, receiver,
                                                 progress or (lambda m: None))
    module.serve = signatures["serving_default"]
    base = Path(export_dir_base)
    stamp = int(time.time())
    while (base / str(stamp)).exists():
        stamp += 1
    return str(save(module, estimator, base / str(stamp), signatures, method_names=methods,
                    checkpoint_path=checkpoint_path))


# tf.estimator.export names the engine does not implement (they raise naming the replacement).
from estflow.estimator._unavailable import unavailable_class  # noqa: E402

ExportOutput = unavailable_class(
    "estimator.export.ExportOutput", "export.ClassificationOutput, export.RegressionOutput or "
    "export.PredictOutput (the outputs the engine exports)")
EvalOutput = unavailable_class(
    "estimator.export.EvalOutput", "EstimatorSpec(eval_metric_ops=...) and "
    "estimator.evaluate(...) (the engine exports serving signatures, not EVAL graphs)")

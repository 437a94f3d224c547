"""The model a batch prediction scores with: where it is, what its signature takes and gives.

:func:`resolve_model` turns what a user names (a pushed model's base, one version, a SavedModel
directory, a train step's ``model`` artifact or a run directory) into one SavedModel
directory. :func:`describe_model` loads it once on the driver to check the signature before any
worker starts: it must take one input of serialized ``tf.Example`` records (as ``serving_default``,
``classify`` and ``regress`` of estflow's exports do), and it is run on an empty batch to learn
each output's dtype and per-row shape. The raw features the model parses come from the
export's ``assets.extra/estflow_raw_features.json`` (written by the train step), so rows are
validated against what the model reads, with no pipeline spec needed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import posixpath

import numpy as np
import tensorflow as tf

from estflow.components._io import storage
from estflow.components._io.bucket_repo import BucketDestination
from estflow.components._io.model_repo import GFileDestination
from estflow.components._io.model_repo import LocalDestination
from estflow.components._io.model_repo import latest_servable
from estflow.dsl.features import Column

__all__ = ["ModelError", "ResolvedModel", "OutputSpec", "ModelInfo", "resolve_model",
           "describe_model", "read_raw_columns", "read_raw_features", "RAW_FEATURES_FILE"]

RAW_FEATURES_FILE = "assets.extra/estflow_raw_features.json"
_SAVED_MODEL = "saved_model.pb"
# Where a SavedModel sits below what a user may name: itself, a train step's model artifact,
# a run directory (local runner layout: <workdir>/train/model/export).
_EXPORT_PLACES = ("", "export", "train/model/export")
_DEFAULTS = {"float": 0.0, "int": 0, "string": ""}


class ModelError(ValueError):
    """No usable model where one was named (missing, no such signature, no raw features)."""


@dataclasses.dataclass(frozen=True)
class ResolvedModel:
    """A SavedModel directory, and its version when it is a pushed version."""

    path: str
    version: int | None = None


@dataclasses.dataclass(frozen=True)
class OutputSpec:
    """One output of the signature: ``kind`` is numpy's dtype kind (``f``, ``i``, ``u``,
    ``b``) or ``"S"`` (strings); ``shape`` the per-row shape (None where the probe failed)."""

    name: str
    kind: str
    dtype: str
    shape: tuple[int, ...] | None


@dataclasses.dataclass(frozen=True)
class ModelInfo:
    """What the job needs to know of the model, learnt once on the driver."""

    path: str
    version: int | None
    signature: str
    input_name: str
    outputs: tuple[OutputSpec, ...]
    columns: tuple[Column, ...]
    # Raw column -> the CSV cells training read as missing in it (the train step records them
    # next to the export); empty for a model trained on another source kind, or before they
    # were recorded.
    na_values: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)


def _join(base: str, *parts: str) -> str:
    return posixpath.join(base, *parts) if "://" in base else os.path.join(base, *parts)


def _exists(path: str) -> bool:
    """Whether a file is at ``path``: local, ``gs://``/``s3://`` (estflow's storage module:
    TensorFlow has no filesystem for them without tensorflow-io), else ``tf.io.gfile``."""
    if "://" not in path or storage.is_remote(path):
        return storage.exists(path)
    return tf.io.gfile.exists(path)


def _read(path: str) -> bytes:
    """The bytes of the file at ``path`` (see :func:`_exists`)."""
    if "://" not in path or storage.is_remote(path):
        return storage.read_bytes(path)
    with tf.io.gfile.GFile(path, "rb") as handle:
        return handle.read()


def _destination(base: str):
    """The pushed model at ``base``, to list its versions."""
    if storage.is_remote(base):
        return BucketDestination(base)
    return GFileDestination(base) if "://" in base else LocalDestination(base)


def resolve_model(ref: str) -> ResolvedModel:
    """The SavedModel directory that ``ref`` names (relative paths: the working directory).

    Raises:
        ModelError: no SavedModel there, nor a pushed model with a complete version.
    """
    base = ref.rstrip("/") if "://" in ref else os.path.abspath(ref)
    for place in _EXPORT_PLACES:
        path = _join(base, place) if place else base
        if _exists(_join(path, _SAVED_MODEL)):
            name = posixpath.basename(path.rstrip("/"))
            version = int(name) if name.isascii() and name.isdigit() and not place else None
            return ResolvedModel(path, version)
    destination = _destination(base)
    versions = destination.list_versions()
    latest = latest_servable(destination) if versions else None
    if latest is None:
        what = (f"versions {versions} but none holds a {_SAVED_MODEL}" if versions
                else f"no {_SAVED_MODEL} and no integer version directories")
        raise ModelError(f"no model at {ref!r}: it has {what}; expected a pushed model "
                         "<base_path>/<model_name> (or one version <base_path>/<model_name>/"
                         "<version>), a SavedModel directory, a train step's model artifact "
                         "or a run directory")
    return ResolvedModel(_join(base, str(latest)), latest)


def read_raw_columns(path: str) -> tuple[Column, ...]:
    """The raw features the model parses (``estflow_raw_features.json``), as columns: a
    required feature has no default (a row without it is rejected, as the model's parser would
    fail the whole batch); the others may be absent.

    Raises:
        ModelError: the file is missing or not in the train step's format.
    """
    return read_raw_features(path)[0]


def read_raw_features(path: str) -> tuple[tuple[Column, ...], dict[str, tuple[str, ...]]]:
    """The raw features the model parses, as columns (:func:`read_raw_columns`), and the CSV
    cells its training read as missing in each (``na_values``, where the train step recorded
    them: a model trained on a CSV source).

    Raises:
        ModelError: the file is missing or not in the train step's format.
    """
    file = _join(path, RAW_FEATURES_FILE)
    if not _exists(file):
        raise ModelError(f"{path} has no {RAW_FEATURES_FILE}, which estflow's train step writes "
                         "next to the export: batch prediction reads the model's raw features "
                         "and their types from it to validate and encode the rows")
    try:
        doc = json.loads(_read(file))
        columns, na_values = [], {}
        for entry in doc["columns"]:
            dtype = entry["dtype"]
            default = None if entry.get("required", False) else _DEFAULTS[dtype]
            columns.append(Column(entry["name"], dtype, default))
            tokens = entry.get("na_values")
            if tokens is not None:
                if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
                    raise ValueError(f"column {entry['name']!r}: na_values must be a list of "
                                     f"strings, got {tokens!r:.200}")
                na_values[entry["name"]] = tuple(tokens)
    except (ValueError, KeyError, TypeError) as err:
        raise ModelError(f"{file} is not a raw features file ({{'columns': [{{'name', "
                         f"'dtype', 'required'}}, ...]}}): {err}") from None
    return tuple(columns), na_values


def describe_model(resolved: ResolvedModel, signature: str, loaded=None) -> ModelInfo:
    """Check ``signature`` and learn its outputs (by scoring zero examples).

    Args:
        resolved: the SavedModel.
        signature: the signature's name.
        loaded: the model when already loaded (default: load it here).

    Raises:
        ModelError: no such signature, or it does not take serialized tf.Examples.
    """
    loaded = loaded if loaded is not None else tf.saved_model.load(
        storage.materialize(resolved.path))
    function = loaded.signatures.get(signature)
    if function is None:
        raise ModelError(f"the model at {resolved.path} has no signature {signature!r}; its "
                         f"signatures: {', '.join(sorted(loaded.signatures))}")
    _args, inputs = function.structured_input_signature
    specs = list(inputs.items())
    if len(specs) != 1 or specs[0][1].dtype != tf.string or specs[0][1].shape.rank != 1:
        usable = sorted(name for name, fn in loaded.signatures.items()
                        if _takes_examples(fn))
        raise ModelError(f"signature {signature!r} takes {dict(inputs)}; batch prediction feeds "
                         "one input of serialized tf.Examples (a string tensor [None]), as "
                         f"these signatures take: {', '.join(usable) or 'none'}")
    name = specs[0][0]
    outputs = _probe(function, name)
    columns, na_values = read_raw_features(resolved.path)
    return ModelInfo(resolved.path, resolved.version, signature, name, outputs, columns,
                     na_values)


def _takes_examples(function) -> bool:
    _args, inputs = function.structured_input_signature
    return len(inputs) == 1 and all(s.dtype == tf.string and s.shape.rank == 1
                                    for s in inputs.values())


def _probe(function, input_name: str) -> tuple[OutputSpec, ...]:
    """Each output's dtype and per-row shape, from scoring an empty batch (the static shapes
    of the signature when it cannot take one)."""
    try:
        arrays = {k: v.numpy() for k, v in
                  function(**{input_name: tf.constant([], tf.string)}).items()}
    except (tf.errors.OpError, ValueError):
        arrays = None
    specs = []
    for name, tensor in sorted(function.structured_outputs.items()):
        dtype = tf.as_dtype(tensor.dtype)
        kind = "S" if dtype == tf.string else np.dtype(dtype.as_numpy_dtype).kind
        if arrays is not None:
            shape = tuple(int(d) for d in arrays[name].shape[1:])
        else:
            dims = tensor.shape.as_list()[1:] if tensor.shape.rank else []
            shape = None if None in dims else tuple(dims)
        specs.append(OutputSpec(name, kind, dtype.name, shape))
    return tuple(specs)

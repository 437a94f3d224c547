"""The raw features of a pipeline as TensorFlow sees them: the declared dtypes and the parsing
spec of the raw tf.Examples that ingest writes, transform reads, and serving parses; and the
raw feature types file the train step writes next to the serving SavedModel and the serve step
reads (:data:`TYPES_FILE`)."""

from __future__ import annotations

import json
from pathlib import Path

import tensorflow as tf

from estflow.dsl.pipeline import Pipeline

__all__ = ["TF_DTYPES", "raw_feature_spec", "TYPES_FILE", "write_types", "read_types"]

TF_DTYPES = {"float": tf.float32, "int": tf.int64, "string": tf.string}
"""Declared column dtype -> the dtype of its tf.Example feature."""

TYPES_FILE = "assets.extra/estflow_raw_features.json"
"""The raw feature types of a SavedModel, relative to it (TF Serving ignores ``assets.extra``)."""

_DTYPE_NAMES = tuple(TF_DTYPES)


def raw_feature_spec(pipeline: Pipeline) -> dict[str, tf.io.FixedLenFeature | tf.io.VarLenFeature]:
    """The parsing spec of the raw Examples ingest writes (also what serving parses): a
    required column is a fixed scalar, a column with a default may be absent."""
    spec: dict = {}
    for column in pipeline.raw_columns():
        dtype = TF_DTYPES[column.dtype]
        spec[column.name] = (tf.io.FixedLenFeature([], dtype) if column.default is None
                             else tf.io.VarLenFeature(dtype))
    return spec


def write_types(export_dir: Path, feature_spec: dict,
                pipeline: Pipeline | None = None) -> Path | None:
    """Write :data:`TYPES_FILE` into ``export_dir`` for a raw parsing spec (what
    ``serving_default`` parses): each feature's name, declared dtype, and whether an example
    must have it; with the ``pipeline`` that trained the model, also each feature's declared
    ``default`` and, for a CSV source, the cells training read as missing (``na_values``), so
    that batch scoring reads rows as ingest did. Nothing is written (None) when a feature has a
    type JSON values cannot be given (serve then types features from the JSON values)."""
    names = {dtype: name for name, dtype in TF_DTYPES.items()}
    declared = {c.name: c for c in pipeline.raw_columns()} if pipeline is not None else {}
    source = pipeline.source if pipeline is not None else None
    columns = []
    for name, feature in sorted(feature_spec.items()):
        dtype = names.get(tf.as_dtype(feature.dtype))
        if dtype is None:
            return None
        required = isinstance(feature, tf.io.FixedLenFeature) and feature.default_value is None
        entry = {"name": name, "dtype": dtype, "required": required}
        column = declared.get(name)
        if column is not None and column.default is not None:
            entry["default"] = column.default
        if column is not None and hasattr(source, "missing_tokens"):
            entry["na_values"] = list(source.missing_tokens(name, column.dtype))
        columns.append(entry)
    path = Path(export_dir) / TYPES_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"columns": columns}, indent=1) + "\n")
    return path


def read_types(version_dir: Path) -> dict[str, str] | None:
    """Read ``assets.extra/estflow_raw_features.json``: how to type JSON features.

    The file, written by the train step next to the SavedModel (:func:`write_types`), is::

        {"columns": [{"name": "fare", "dtype": "float", "required": true},
                     {"name": "payment_type", "dtype": "string", "required": false}, ...]}

    ``dtype`` is one of ``float`` (-> ``float_list``), ``int`` (-> ``int64_list``) or
    ``string`` (-> ``bytes_list``); other keys of a column and of the document are ignored, so
    the format can grow (``required``: whether an example must have the feature; ``default``:
    the value the model's transform graph gives an absent feature; ``na_values``: the CSV cells
    training read as missing, which batch scoring reads as missing too). ``:classify``/``:regress`` use it to build each ``tf.Example`` feature
    with the list type the model parses (a JSON ``3`` for a float column becomes
    ``float_list [3.0]``); features not listed are typed from their JSON values.

    Returns:
        ``{name: dtype}``, or None when the model has no such file.

    Raises:
        ValueError: the file exists but is not in this format (the version then fails to load:
            serving it with silently wrong feature types would be worse).
    """
    path = version_dir / TYPES_FILE
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path} is not valid JSON: {e}") from None
    columns = doc.get("columns") if isinstance(doc, dict) else None
    if not isinstance(columns, list):
        raise ValueError(f"{path}: expected an object with a 'columns' list, got {doc!r:.200}")
    types: dict[str, str] = {}
    for i, column in enumerate(columns):
        name = column.get("name") if isinstance(column, dict) else None
        dtype = column.get("dtype") if isinstance(column, dict) else None
        if not isinstance(name, str) or dtype not in _DTYPE_NAMES:
            raise ValueError(f"{path}: columns[{i}] must be {{'name': str, 'dtype': one of "
                             f"{list(_DTYPE_NAMES)}}}, got {column!r:.200}")
        types[name] = dtype
    return types

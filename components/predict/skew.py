"""Skew: the rows a batch prediction scores against the training data of the model scoring them.

A pushed version carries the statistics of its training data
(``assets.extra/estflow_statistics.pb``). When the model has them, the prediction job computes
the same statistics of the rows it reads (one more branch of the same Beam pass, the validate
step's :class:`SplitStatistics`, as the ``serving`` dataset), and the driver compares them with
the training split: TFDV's skew comparators, L-infinity distance for categorical columns and
Jensen-Shannon divergence for numeric ones, with the drift thresholds (``drift``, ``drift_linf``,
``drift_js``) the scoring pipeline's ``checks`` declares, else those the model was trained
under (the push step records them in the version's lineage). Each anomaly is printed as a
warning and recorded in ``predict.json`` (``skew``), and the statistics are written beside it
(``serving_statistics.pb``); with ``BatchPredict.fail_on_skew`` an anomaly fails the step
(exit status 4, a data anomaly) after the predictions are published.
"""

from __future__ import annotations

import math

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from tensorflow_metadata.proto.v0 import statistics_pb2

from estflow.components._io import lineage
from estflow.components._statistics import anomalies as _anomalies
from estflow.components._statistics import distance as _distance
from estflow.components._statistics.schema import feature_name
from estflow.components._statistics.statistics import SplitStatistics
from estflow.components._statistics.statistics import read_statistics
from estflow.dsl.contracts import Files

__all__ = ["SERVING", "SERVING_STATISTICS", "Baseline", "baseline_of", "ServingStatistics",
           "check", "write_serving"]

SERVING = "serving"
"""The name of the scored rows' dataset in their statistics (TFDV's serving statistics)."""
SERVING_STATISTICS = "serving_statistics.pb"
"""The scored rows' statistics, written beside ``predict.json``."""
_TYPES = {statistics_pb2.FeatureNameStatistics.FLOAT: "float",
          statistics_pb2.FeatureNameStatistics.INT: "int",
          statistics_pb2.FeatureNameStatistics.STRING: "string"}


class Baseline:
    """The training statistics of a model, and the columns both they and the scored rows
    have (``specs``: ``(name, dtype, categorical)`` as the training data was summarized)."""

    def __init__(self, path: str, stats, columns) -> None:
        self.path, self.stats = path, stats
        train = next((d for d in stats.datasets if d.name == "train"), None)
        read = {c.name for c in columns}
        self.specs = tuple(
            (feature_name(f), _TYPES.get(f.type, "string"), f.HasField("string_stats"))
            for f in (train.features if train is not None else ())
            if feature_name(f) in read and f.type in _TYPES)


def baseline_of(model_path: str, columns) -> Baseline | None:
    """The training statistics stored with the model at ``model_path`` (None: it has none,
    e.g. a model not pushed by estflow, or no column in common with the scored rows)."""
    path = f"{str(model_path).rstrip('/')}/{Files.SERVED_STATISTICS}"
    if not FileSystems.exists(path):
        return None
    baseline = Baseline(path, read_statistics(path), columns)
    return baseline if baseline.specs else None


class ServingStatistics(beam.PTransform):
    """RowChunks -> the serialized statistics of their rows, written to ``path``."""

    def __init__(self, specs, path: str) -> None:
        super().__init__()
        self._specs, self._path = tuple(specs), path

    def expand(self, chunks):
        return (chunks
                | "Rows" >> beam.Map(lambda chunk: chunk.batch)
                | "Combine" >> beam.CombineGlobally(SplitStatistics(SERVING, self._specs))
                | "Write" >> beam.Map(_write, self._path))


def _write(serialized: bytes, path: str) -> None:
    with FileSystems.create(path) as handle:
        handle.write(statistics_pb2.DatasetFeatureStatisticsList(
            datasets=[statistics_pb2.DatasetFeatureStatistics.FromString(serialized)]
        ).SerializeToString())


def write_serving(stats, out: str) -> None:
    """Write the scored rows' statistics into directory ``out`` (:data:`SERVING_STATISTICS`)."""
    with FileSystems.create(FileSystems.join(out, SERVING_STATISTICS)) as handle:
        handle.write(stats.SerializeToString())


def check(serving, baseline: Baseline, checks: dict | None) -> dict:
    """The skew of ``serving`` from the baseline's training split: each column's distance and
    the anomalies above the thresholds ``checks`` (:func:`thresholds_of`; None: none)."""
    train = next(d for d in baseline.stats.datasets if d.name == "train")
    rows = next(iter(serving.datasets), None)
    distances = {}
    if rows is not None and rows.num_examples and train.num_examples:
        mine = {feature_name(f): f for f in rows.features}
        for f in train.features:
            name = feature_name(f)
            if name in mine:
                distances[name] = _column_distance(mine[name], f)
    found = _anomalies.skew(serving, baseline.stats, thresholds=_thresholds(checks, distances))
    found = [a for a in found if a.column in distances]  # not the label, nor unread columns
    return {"baseline": baseline.path, "distances": distances,
            "anomalies": [{"column": a.column, "kind": a.kind, "split": a.split,
                           "observed": a.observed, "allowed": a.allowed,
                           "description": a.description} for a in found]}


def _column_distance(serving, training) -> dict:
    if serving.HasField("string_stats") and training.HasField("string_stats"):
        value, distance = _distance.l_infinity(_distance.value_counts(serving),
                                               _distance.value_counts(training))
        return {"l_infinity": round(distance, 6), "at": value}
    h1, h2 = _anomalies._standard(serving), _anomalies._standard(training)
    if h1 is None or h2 is None:
        return {}
    return {"jensen_shannon": round(_distance.jensen_shannon(h1, h2), 6)}


def thresholds_of(checks, model_path: str) -> tuple[dict | None, str]:
    """The drift thresholds skew is checked with, and where they come from: those the scoring
    pipeline declares (``checks``, a ``DataChecks``), else those the model's training data was
    checked with (recorded in its lineage by the push step), else none (``(None, ...)``)."""
    if checks is not None:
        return lineage.skew_thresholds(checks), "the pipeline's checks"
    recorded = (lineage.read_lineage(str(model_path).rstrip("/")) or {}).get("checks")
    if isinstance(recorded, dict):
        return recorded, "the checks the model was trained under"
    return None, "none: neither the pipeline nor the model declares drift thresholds"


def _thresholds(checks: dict | None, distances) -> dict:
    never = math.inf
    checks = checks or {}
    linf = {"*": never if checks.get("drift_linf") is None else checks["drift_linf"]}
    js = {"*": never if checks.get("drift_js") is None else checks["drift_js"]}
    for column, limit in (checks.get("drift") or {}).items():
        linf[column] = js[column] = limit
    return {"linf": linf, "js_divergence": js}

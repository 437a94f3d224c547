"""Exporters: SavedModel exports after evaluations (tf.estimator's ``exporter`` module).

``train_and_evaluate`` calls every exporter of the ``EvalSpec`` after each evaluation with
``export_path = model_dir/export/<exporter name>``; an export is a timestamped directory
``export_path/<unix seconds>`` written by ``Estimator.export_saved_model`` (atomically: under a
temporary name, then renamed).

- :class:`LatestExporter`: every time; keeps the newest ``exports_to_keep``.
- :class:`BestExporter`: when the result beats the best so far (``compare_fn``, lower loss by
  default); the best so far survives restarts: it is read back from the evaluation event
  files in ``model_dir`` (``event_file_pattern``).
- :class:`FinalExporter`: once, after the final evaluation.

Example::

    receiver_fn = parsing_serving_input_receiver_fn(feature_spec)
    eval_spec = EvalSpec(eval_input_fn, exporters=[
        BestExporter("best", receiver_fn, exports_to_keep=3),
        FinalExporter("final", receiver_fn)])
"""

from __future__ import annotations

import glob
import inspect
import logging
import os
import shutil
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

from estflow.estimator._engine.reporting import read_scalars

__all__ = ["Exporter", "LatestExporter", "BestExporter", "FinalExporter", "loss_smaller"]

_log = logging.getLogger("estflow.estimator")


class Exporter:
    """A kind of export run after evaluations. Subclasses set ``name`` and define
    :meth:`export`."""

    name: str = ""

    def export(self, estimator, export_path: str, checkpoint_path: str | None,
               eval_result: Mapping[str, Any], is_the_final_export: bool) -> bytes | None:
        """Export ``estimator`` (at ``checkpoint_path``) under ``export_path``; returns the
        export directory as bytes (as tf.estimator's exporters did), or None when this
        exporter skips this evaluation."""
        raise NotImplementedError


def _check_keep(exports_to_keep: float | None) -> int | None:
    """``exports_to_keep`` as a count: a positive number or None, as tf.estimator 2.15 took
    it (a float such as ``5.0`` keeps that many)."""
    if exports_to_keep is None:
        return None
    if isinstance(exports_to_keep, bool) or not isinstance(exports_to_keep, (int, float)) \
            or exports_to_keep <= 0:
        raise ValueError("Received an invalid value for `exports_to_keep`, expected a positive "
                         f"number or None. Received: exports_to_keep={exports_to_keep!r}")
    return max(1, int(exports_to_keep))


class _SavedModel:
    """What the exporters share: the receiver fn, extra assets, the export itself."""

    def __init__(self, name: str, serving_input_receiver_fn: Callable,
                 assets_extra: Mapping[str, str] | None, as_text: bool) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"Received an invalid value for `name`, expected a non-empty "
                             f"string. Received: name={name!r}")
        if not callable(serving_input_receiver_fn):
            raise TypeError("Expected serving_input_receiver_fn to be callable; received "
                            f"{type(serving_input_receiver_fn).__name__}")
        if as_text:  # tf.estimator 2.15 took it: warn, and write what TF 2 writes
            _log.warning("exporter %r: as_text=True is ignored: the SavedModel is written as "
                         "binary saved_model.pb (TF 2 writes no saved_model.pbtxt)", name)
        self.name = name
        self.receiver_fn = serving_input_receiver_fn
        self.assets_extra = dict(assets_extra or {})

    def export(self, estimator, export_path: str, checkpoint_path: str | None) -> bytes:
        """The export's path, as bytes (``Estimator.export_saved_model``'s)."""
        return estimator.export_saved_model(export_path, self.receiver_fn,
                                            assets_extra=self.assets_extra or None,
                                            checkpoint_path=checkpoint_path)


def _garbage_collect(export_path: str, keep: int | None) -> None:
    """Delete all but the ``keep`` newest exports (10-digit timestamp directories)."""
    if keep is None or not os.path.isdir(export_path):
        return
    versions = sorted(int(n) for n in os.listdir(export_path) if len(n) == 10 and n.isdigit())
    for version in versions[:-keep]:
        shutil.rmtree(os.path.join(export_path, str(version)), ignore_errors=True)


class LatestExporter(Exporter):
    """Exports after every evaluation and keeps the newest ``exports_to_keep``.

    Args:
        name: the export subdirectory (``model_dir/export/<name>``).
        serving_input_receiver_fn: ``() -> ServingInputReceiver``.
        assets_extra: ``{path inside assets.extra/: source file}`` copied into each export.
        as_text: accepted as tf.estimator 2.15 took it; True only logs a warning (TF 2
            writes binary SavedModels).
        exports_to_keep: how many exports to keep (None: all).
    """

    def __init__(self, name: str, serving_input_receiver_fn: Callable,
                 assets_extra: Mapping[str, str] | None = None, as_text: bool = False,
                 exports_to_keep: int | None = 5) -> None:
        self._keep = _check_keep(exports_to_keep)
        self._saved_model = _SavedModel(name, serving_input_receiver_fn, assets_extra, as_text)
        self.name = name

    def export(self, estimator, export_path, checkpoint_path, eval_result,
               is_the_final_export) -> bytes:
        path = self._saved_model.export(estimator, export_path, checkpoint_path)
        _garbage_collect(export_path, self._keep)
        return path


class FinalExporter(Exporter):
    """Exports once, after the final evaluation (the end of training).

    Args:
        name: the export subdirectory.
        serving_input_receiver_fn: ``() -> ServingInputReceiver``.
        assets_extra: as for :class:`LatestExporter`.
        as_text: as for :class:`LatestExporter`.
    """

    def __init__(self, name: str, serving_input_receiver_fn: Callable,
                 assets_extra: Mapping[str, str] | None = None, as_text: bool = False) -> None:
        self._saved_model = _SavedModel(name, serving_input_receiver_fn, assets_extra, as_text)
        self.name = name

    def export(self, estimator, export_path, checkpoint_path, eval_result,
               is_the_final_export) -> bytes | None:
        if not is_the_final_export:
            return None
        return self._saved_model.export(estimator, export_path, checkpoint_path)


def loss_smaller(best_eval_result: Mapping[str, Any],
                 current_eval_result: Mapping[str, Any]) -> bool:
    """True when the current result's ``loss`` is smaller than the best's.

    Example:
        >>> loss_smaller({"loss": 0.5}, {"loss": 0.4})
        True
    """
    for label, result in (("best_eval_result", best_eval_result),
                          ("current_eval_result", current_eval_result)):
        if not result or "loss" not in result:
            raise ValueError(f"Expected {label} to have a 'loss'; received {result!r}")
    return best_eval_result["loss"] > current_eval_result["loss"]


def _check_compare_fn(compare_fn: Callable) -> None:
    if not callable(compare_fn):
        raise ValueError(f"Expected compare_fn to be callable; received {compare_fn!r}")
    args = set(inspect.signature(compare_fn).parameters)
    if args != {"best_eval_result", "current_eval_result"}:
        raise ValueError("Expected compare_fn(best_eval_result, current_eval_result); "
                         f"received a function of {sorted(args)}")


class BestExporter(Exporter):
    """Exports when an evaluation beats the best one so far.

    Args:
        name: the export subdirectory.
        serving_input_receiver_fn: ``() -> ServingInputReceiver``.
        event_file_pattern: evaluation event files, relative to ``model_dir``, that hold the
            results of earlier evaluations (so the best survives a restart); None: start
            from scratch.
        compare_fn: ``(best_eval_result, current_eval_result) -> bool``, True when the current
            is better (default :func:`loss_smaller`).
        assets_extra: as for :class:`LatestExporter`.
        as_text: as for :class:`LatestExporter`.
        exports_to_keep: how many exports to keep (None: all).
    """

    def __init__(self, name: str = "best_exporter",
                 serving_input_receiver_fn: Callable | None = None,
                 event_file_pattern: str | None = "eval/*.tfevents.*",
                 compare_fn: Callable = loss_smaller,
                 assets_extra: Mapping[str, str] | None = None, as_text: bool = False,
                 exports_to_keep: int | None = 5) -> None:
        _check_compare_fn(compare_fn)
        self._keep = _check_keep(exports_to_keep)
        self._saved_model = _SavedModel(name, serving_input_receiver_fn, assets_extra, as_text)
        self.name = name
        self._compare = compare_fn
        self._pattern = event_file_pattern
        self._model_dir: str | None = None
        self._best: Mapping[str, Any] | None = None

    def export(self, estimator, export_path, checkpoint_path, eval_result,
               is_the_final_export) -> bytes | None:
        if self._model_dir != estimator.model_dir:
            self._model_dir = estimator.model_dir
            self._best = self._best_so_far(eval_result.get("global_step"))
        if self._best is not None and not self._compare(best_eval_result=self._best,
                                                        current_eval_result=eval_result):
            return None
        self._best = dict(eval_result)
        path = self._saved_model.export(estimator, export_path, checkpoint_path)
        _garbage_collect(export_path, self._keep)
        return path

    def _best_so_far(self, current_step: int | None) -> Mapping[str, Any] | None:
        """The best earlier result in the event files (the current one excluded)."""
        if not self._pattern:
            return None
        files = glob.glob(os.path.join(self._model_dir, self._pattern))
        best = None
        for step, metrics in read_scalars(files).items():
            if step == current_step:
                continue
            if best is None or self._compare(best_eval_result=best, current_eval_result=metrics):
                best = metrics
        return best

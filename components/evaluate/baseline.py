"""The baseline: the model served at the push target (its highest complete version), which the
evaluated model is compared with.

A baseline pushed by estflow carries its own outputs on the rows it was evaluated on
(:mod:`estflow.components.evaluate.outputs`). When the eval files look the same (names, sizes,
head, limit), the candidate's pass scores only the candidate, and the rows' digest then decides:
the same rows, the stored outputs are the baseline's; other rows, the baseline is scored in a
pass of its own. Otherwise it is scored in the candidate's pass.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from estflow.components._io import lineage
from estflow.components._io import model_repo
from estflow.components.evaluate import blessing as _blessing
from estflow.components.evaluate import metrics as metrics_lib
from estflow.components.evaluate import outputs as _outputs
from estflow.components.evaluate.results import json_safe
from estflow.components.evaluate.scoring import Scores
from estflow.dsl.pipeline import Pipeline

__all__ = ["Served", "find_served", "describe", "use_stored", "blessing_baseline"]


@dataclasses.dataclass(frozen=True)
class Served:
    """The served model, and its outputs stored for eval files like these.

    Attributes:
        version: its version at the push target.
        path: its directory.
        stored: its stored outputs, when they were computed on eval files of these names and
            sizes with this head and limit; else None.
        why: why ``stored`` is None ("" when it is not).
    """

    version: int
    path: str
    stored: _outputs.Stored | None
    why: str

    def scored_in_pass(self) -> str | None:
        """The baseline directory the candidate's pass scores: None when outputs are stored."""
        return self.path if self.stored is None else None


def find_served(pipeline: Pipeline, *, head: str, eval_files: list[str],
                limit: int | None) -> Served | None:
    """The model served at the push target with its matching stored outputs, or None (no push
    target, or nothing served there)."""
    if pipeline.push is None:
        return None
    destination = model_repo.destination_for(pipeline.push.base_path,
                                                pipeline.push.model_name)
    version = model_repo.latest_servable(destination)
    if version is None:
        return None
    path = f"{destination.model_base}/{version}"
    stored, why = _outputs.read_matching(path, head=head, eval_files=eval_files, limit=limit)
    return Served(version, path, stored, why)


def describe(served: Served | None) -> str:
    """The baseline, as the step's first line says it."""
    if served is None:
        return "no baseline (no model served at the push target)"
    if served.stored is not None:
        return (f"baseline: version {served.version} at {served.path} (its stored outputs are "
                "for eval files like these: read, not scored, if the rows are the same)")
    return (f"baseline: version {served.version} at {served.path} ({served.why}: scored in "
            "the same pass)")


def use_stored(served: Served | None, scores: Scores,
               score_again: Callable[[str], tuple[np.ndarray | None, str | None]],
               progress: Callable[[str], None]) -> tuple[Scores, bool]:
    """``scores`` with the baseline's stored outputs when they are for the rows just scored
    (True: reused), else with the baseline scored by ``score_again(path)`` (False); unchanged
    when no outputs are stored."""
    if served is None or served.stored is None:
        return scores, False
    if served.stored.same_rows(scores.digest, len(scores.labels)):
        progress(f"baseline: version {served.version}'s outputs on these {len(scores.labels)} "
                 "rows were stored with it when it was evaluated: reused")
        return dataclasses.replace(scores, baseline=served.stored.outputs), True
    progress(f"baseline: version {served.version}'s stored outputs are for other rows "
             "(another digest): scoring it")
    base, error = score_again(served.path)
    return dataclasses.replace(scores, baseline=base, baseline_error=error), False


def blessing_baseline(served: Served | None, scores: Scores, head: str,
                      reused: bool) -> _blessing.Baseline | None:
    """What the blessing compares with: the baseline's metrics on the eval split, weighted as
    the candidate's (or why it could not be scored); None without a baseline."""
    if served is None:
        return None
    fingerprint = (lineage.read_lineage(served.path) or {}).get("fingerprint")
    if scores.baseline is None:
        return _blessing.Baseline(served.version, served.path, None, scores.baseline_error,
                                  fingerprint=fingerprint)
    with np.errstate(all="ignore"):
        metrics = metrics_lib.head_metrics(head, scores.labels, scores.baseline,
                                              scores.weights)
    return _blessing.Baseline(served.version, served.path, json_safe(metrics),
                              outputs="stored" if reused else "scored",
                              fingerprint=fingerprint)

"""Blessing: does a candidate model meet the declared thresholds, and does it not regress from
the model being served (the baseline)?

Pure Python on metric dictionaries: the evaluate step measures the candidate and the baseline
on the same eval examples, then calls :func:`bless`. A rejection is a result (``blessed`` is
False, with one human-readable reason per check), not an error; only a threshold naming a
metric that was not measured is an error, because it can never pass.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

from estflow.dsl.specs import Threshold

__all__ = ["Baseline", "Check", "Blessing", "bless", "check_metric_names"]

# Metrics are exact (NumPy) but go through float32 model outputs: a candidate equal to its
# baseline must not fail max_regression=0 on rounding noise.
_TOLERANCE = 1e-9


@dataclasses.dataclass(frozen=True)
class Baseline:
    """The model currently served at the push target, evaluated on the same examples.

    Attributes:
        version: its version number.
        path: its directory.
        metrics: its metrics, or None when it could not be evaluated (see ``error``).
        error: why it could not be evaluated (e.g. a different head or a broken SavedModel).
        outputs: ``"scored"`` (it was run on the eval rows) or ``"stored"`` (its outputs on
            the same rows, kept with it since its own evaluation, were read:
            :mod:`estflow.components.evaluate.outputs`); None when it has no metrics.
        fingerprint: its model's fingerprint, from its lineage (None: it has none). A model
            pushed after this evaluation records ``{version, fingerprint}`` as what it was
            evaluated against (:mod:`estflow.components._io.lineage`).
    """

    version: int
    path: str
    metrics: Mapping[str, Any] | None = None
    error: str | None = None
    outputs: str | None = None
    fingerprint: str | None = None

    def to_json(self) -> dict:
        out = {"version": self.version, "path": self.path, "fingerprint": self.fingerprint,
               "metrics": self.metrics}
        if self.outputs is not None:
            out["outputs"] = self.outputs
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclasses.dataclass(frozen=True)
class Check:
    """One checked condition: a bound or the regression limit of one threshold."""

    metric: str
    condition: str  # "lower_bound" | "upper_bound" | "max_regression" | "none"
    passed: bool
    reason: str


@dataclasses.dataclass(frozen=True)
class Blessing:
    blessed: bool
    checks: tuple[Check, ...]
    baseline: Baseline | None
    thresholds: tuple[Threshold, ...]

    @property
    def reasons(self) -> list[str]:
        return [check.reason for check in self.checks]

    @property
    def failures(self) -> list[str]:
        return [check.reason for check in self.checks if not check.passed]

    def to_json(self) -> dict:
        """The ``blessing.json`` document."""
        return {
            "blessed": self.blessed,
            "reasons": self.reasons,
            "checks": [dataclasses.asdict(c) for c in self.checks],
            "baseline": self.baseline.to_json() if self.baseline else None,
            "thresholds": [dataclasses.asdict(t) for t in self.thresholds],
        }


def check_metric_names(thresholds: Sequence[Threshold], available: Sequence[str]) -> None:
    """Raise ValueError if a threshold names a metric that is not measured.

    Raises:
        ValueError: naming the threshold, the unknown metric and the available metrics.
    """
    known = sorted(available)
    for i, threshold in enumerate(thresholds):
        if threshold.metric not in known:
            hint = (" (the evaluate step's loss is 'average_loss', the mean over the eval "
                    "examples; tf.estimator's eval 'loss' is the mean of batch losses, which "
                    "it does not compute)"
                    if threshold.metric == "loss" and "average_loss" in known else "")
            raise ValueError(f"eval.thresholds[{i}].metric: expected one of the evaluated "
                             f"metrics {known}. Received: {threshold.metric!r}{hint}")


def bless(thresholds: Sequence[Threshold], metrics: Mapping[str, Any],
          baseline: Baseline | None) -> Blessing:
    """Check each threshold's bounds on ``metrics`` and its ``max_regression`` against the
    baseline's metrics; blessed when every check passes (and when there are no thresholds).

    Args:
        thresholds: the pipeline's ``eval.thresholds``.
        metrics: the candidate's metrics (a NaN or None value fails its checks).
        baseline: the served model and its metrics; None when nothing is served yet (first
            push), in which case ``max_regression`` checks pass.

    Raises:
        ValueError: a threshold names a metric not in ``metrics``.
    """
    thresholds = tuple(thresholds)
    check_metric_names(thresholds, list(metrics))
    checks: list[Check] = []
    for t in thresholds:
        value = _number(metrics[t.metric])
        if t.lower_bound is not None:
            checks.append(_bound(t.metric, value, t.lower_bound, "lower_bound"))
        if t.upper_bound is not None:
            checks.append(_bound(t.metric, value, t.upper_bound, "upper_bound"))
        if t.max_regression is not None:
            checks.append(_regression(t, value, baseline))
    if not checks:
        checks.append(Check("", "none", True, "PASS no thresholds declared: blessed without "
                            "conditions (declare eval.thresholds to gate the push)"))
    return Blessing(all(c.passed for c in checks), tuple(checks), baseline, thresholds)


def _number(value: Any) -> float | None:
    """A finite float, or None for NaN/None (a metric undefined on these examples)."""
    if value is None or isinstance(value, bool):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _fmt(value: float) -> str:
    return f"{value:.6g}"


def _bound(metric: str, value: float | None, bound: float, condition: str) -> Check:
    if value is None:
        return Check(metric, condition, False, f"FAIL {metric} is undefined on the eval "
                     f"examples (NaN, e.g. only one class present), so {condition} "
                     f"{_fmt(bound)} cannot be met")
    lower = condition == "lower_bound"
    passed = value >= bound - _TOLERANCE if lower else value <= bound + _TOLERANCE
    op = (">=" if passed else "<") if lower else ("<=" if passed else ">")
    verdict = "PASS" if passed else "FAIL"
    return Check(metric, condition, passed,
                 f"{verdict} {metric} = {_fmt(value)} {op} {condition} {_fmt(bound)}")


def _regression(t: Threshold, value: float | None, baseline: Baseline | None) -> Check:
    limit = f"max_regression {_fmt(t.max_regression)}"
    if baseline is None:
        return Check(t.metric, "max_regression", True, f"PASS {t.metric} {limit}: no baseline "
                     "(no model is served at the push target yet)")
    served = f"baseline version {baseline.version}"
    if baseline.metrics is None:
        return Check(t.metric, "max_regression", False, f"FAIL {t.metric} {limit}: the "
                     f"{served} at {baseline.path} could not be evaluated ({baseline.error}); "
                     "remove it or drop max_regression to push")
    base = _number(baseline.metrics.get(t.metric))
    if base is None:
        return Check(t.metric, "max_regression", True, f"PASS {t.metric} {limit}: the "
                     f"{served}'s {t.metric} is undefined, nothing to compare with")
    if value is None:
        return Check(t.metric, "max_regression", False, f"FAIL {t.metric} is undefined on "
                     f"the eval examples, {served} has {_fmt(base)}")
    # regression > 0 means worse than the baseline, in the metric's direction
    regression = base - value if t.higher_is_better else value - base
    passed = regression <= t.max_regression + _TOLERANCE
    direction = "higher" if t.higher_is_better else "lower"
    detail = (f"{t.metric} = {_fmt(value)} vs {_fmt(base)} for the {served} "
              f"({direction} is better): ")
    detail += (f"worse by {_fmt(regression)}" if regression > 0
               else f"better by {_fmt(-regression)}" if regression < 0 else "equal")
    return Check(t.metric, "max_regression", passed,
                 f"{'PASS' if passed else 'FAIL'} {detail}, {limit}")

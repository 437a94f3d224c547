"""The tune step's search as a KFP ``dsl.ParallelFor`` (``estflow compile --tune-on
parallel-for``, for a KFP without Katib): each iteration's task runs one trial
(``python -m estflow.components.tune.katib_trial ... --result DIR``), which writes its
outcome to :data:`RESULT_FILE` in its output artifact, a failure included; this module's
:func:`main`, the tune task, collects them and writes the best assignment where the final
train reads it.

``python -m estflow.components.tune.on_parallel_for --spec S --trial DIR [--trial DIR ...]
--hyperparameters OUT``

Outputs (``OUT``), as the Katib search writes them: ``best.json`` (``{"assignment",
"objective", "value", "trial", "higher_is_better", "metrics"}``, the trial its number in the
compiled draw) and ``metrics.json`` (``{"objective", "higher_is_better", "best_trial",
"complete", "pruned", "failed", "metrics"}``). The task fails (exit status 1, one
``[tune] error:`` line) when more than ``Tune.max_failures`` trials failed, or none completed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from estflow.components._io.jsonfile import write_json
from estflow.components._runtime import entry
from estflow.dsl.contracts import TUNE_BEST
from estflow.dsl.contracts import Files
from estflow.dsl.models import LOWER_IS_BETTER

__all__ = ["RESULT_FILE", "COMPLETE", "FAIL", "CollectError", "write_result", "read_result",
           "choose", "collect", "main"]

RESULT_FILE = "trial.json"
"""A trial's outcome in its task's output artifact: ``{"trial", "assignment", "objective",
"state", "value", "error", "metrics", "seconds"}``."""
COMPLETE, FAIL = "COMPLETE", "FAIL"
_PREFIX = "[tune]"


class CollectError(Exception):
    """The search gave up: too many trials failed, or none completed."""


def write_result(folder: str | Path, *, trial: int, assignment: Mapping[str, Any],
                 objective: str, value: float | None = None, error: str | None = None,
                 metrics: Mapping[str, Any] | None = None,
                 seconds: Mapping[str, Any] | None = None) -> Path:
    """Write one trial's outcome to ``folder``/:data:`RESULT_FILE`: COMPLETE with a finite
    ``value``, else FAIL (``error`` says why; a value that is not a finite number is one)."""
    ok = error is None and isinstance(value, (int, float)) and math.isfinite(value)
    if error is None and not ok:
        error = f"the objective {objective} is not a finite number: {value!r}"
    path = Path(folder) / RESULT_FILE
    write_json(path, {"trial": int(trial), "assignment": _jsonable(dict(assignment)),
                      "objective": objective, "state": COMPLETE if ok else FAIL,
                      "value": float(value) if ok else None, "error": None if ok else error,
                      "metrics": _jsonable(dict(metrics or {})),
                      "seconds": dict(seconds or {})})
    return path


def read_result(folder: str | Path) -> dict[str, Any]:
    """A trial's outcome from its artifact ``folder``; a folder without a readable one is a
    failed trial (its task died before writing it)."""
    path = Path(folder) / RESULT_FILE
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        return {"trial": None, "assignment": {}, "state": FAIL, "value": None,
                "error": f"no readable {RESULT_FILE} in {folder}: {type(err).__name__}",
                "metrics": {}}
    if not isinstance(found, dict):
        return {"trial": None, "assignment": {}, "state": FAIL, "value": None,
                "error": f"{path} is not a JSON object", "metrics": {}}
    return found


def _completed(result: Mapping[str, Any]) -> bool:
    value = result.get("value")
    return (result.get("state") == COMPLETE and isinstance(value, (int, float))
            and not isinstance(value, bool) and math.isfinite(value))


def choose(results: Sequence[Mapping[str, Any]], *, higher_is_better: bool,
           max_failures: int) -> tuple[Mapping[str, Any], dict[str, int]]:
    """The best completed trial of ``results`` (the largest value, or the smallest when not
    ``higher_is_better``; a tie: the lowest trial number) and the counts (``complete``,
    ``failed``: a trial that is not COMPLETE with a finite value).

    Raises:
        CollectError: more than ``max_failures`` trials failed, or none completed.
    """
    done = [r for r in results if _completed(r)]
    failed = [r for r in results if not _completed(r)]
    counts = {"complete": len(done), "failed": len(failed), "trials": len(results)}
    last = (f"; the last error: trial {failed[-1].get('trial')}: {failed[-1].get('error')}"
            if failed else "")
    if len(failed) > max_failures:
        raise CollectError(f"{len(failed)} of {len(results)} trial(s) failed, more than "
                           f"max_failures={max_failures}: the search gave up{last}")
    if not done:
        raise CollectError(f"no trial completed (of {len(results)}){last}")
    sign = 1 if higher_is_better else -1
    best = max(done, key=lambda r: (sign * r["value"], -_number(r)))
    return best, counts


def _number(result: Mapping[str, Any]) -> int:
    trial = result.get("trial")
    return trial if isinstance(trial, int) and not isinstance(trial, bool) else sys.maxsize


def collect(folders: Sequence[str | Path], out: str | Path, *, objective: str,
            higher_is_better: bool, max_failures: int,
            echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Read the trials' results in ``folders``, choose (:func:`choose`), write ``best.json``
    and ``metrics.json`` into ``out``; returns what ``best.json`` holds."""
    results = sorted((read_result(f) for f in folders), key=_number)
    for r in results:
        shown = f"{objective}={r['value']!r}" if _completed(r) else f"failed: {r.get('error')}"
        echo(f"{_PREFIX} trial {r.get('trial')}: {shown} {json.dumps(r.get('assignment'))}")
    best, counts = choose(results, higher_is_better=higher_is_better, max_failures=max_failures)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    chosen = {"assignment": dict(best.get("assignment") or {}), "objective": objective,
              "value": best["value"], "trial": best.get("trial"),
              "higher_is_better": higher_is_better,
              "metrics": dict(best.get("metrics") or {objective: best["value"]})}
    write_json(out / TUNE_BEST, chosen)
    write_json(out / Files.METRICS, {
        "objective": objective, "higher_is_better": higher_is_better,
        "best_trial": best.get("trial"), "complete": counts["complete"], "pruned": 0,
        "failed": counts["failed"], "metrics": {objective: best["value"]}})
    echo(f"{_PREFIX} {counts['trials']} trial(s): {counts['complete']} complete, "
         f"{counts['failed']} failed; best trial {best.get('trial')}: "
         f"{objective}={best['value']!r}; wrote {out / TUNE_BEST}")
    return chosen


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m estflow.components.tune.on_parallel_for",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", required=True, help="the pipeline: JSON text or a file")
    parser.add_argument("--trial", action="append", default=[], metavar="DIR",
                        help="a trial task's output artifact (repeated: one per trial)")
    parser.add_argument("--hyperparameters", required=True, metavar="OUT",
                        help="where best.json and metrics.json are written")
    return parser


def main(argv: list[str] | None = None, *, echo: Callable[[str], None] | None = None) -> int:
    """Collect the trials (module docstring); returns the exit status."""
    args = _parser().parse_args(argv)
    echo = echo or (lambda line: print(line, flush=True))
    tune = entry.load_pipeline(args.spec).tune
    if tune is None:
        print(f"{_PREFIX} error: the spec declares no search: Pipeline.tune is None",
              file=sys.stderr, flush=True)
        return 1
    higher = tune.higher_is_better
    if higher is None:  # as the pipeline's checks resolve it
        higher = tune.objective not in LOWER_IS_BETTER
    try:
        collect(args.trial, args.hyperparameters, objective=tune.objective,
                higher_is_better=bool(higher),
                max_failures=tune.max_failures, echo=echo)
    except CollectError as err:
        print(f"{_PREFIX} error: {err}", file=sys.stderr, flush=True)
        return 1
    return 0


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


if __name__ == "__main__":
    entry.exit_after(main)

"""A trial runner without TensorFlow, for the search's own tests: a trial's value is a fixed
function of its assignment (:func:`score`), each call is logged (one JSON line in ``calls``:
its number, assignment, pid, time) and may fail, report intermediate values or take time.

``python -m tests.components.tune._fake SPEC OUT STUDY CALLS DELAY`` runs the tune step's
:func:`~estflow.components.tune.step.run` with it (a step process to kill in a test).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from estflow.components._runtime import entry
from estflow.components.tune.step import run
from estflow.components.tune.trial import Outcome
from estflow.components.tune.trial import Pruned
from estflow.components.tune.trial import TrialError
from estflow.components.tune.trial import TrialRun

STUDY_KEY = "fake-study"


def score(assignment: dict) -> float:
    """Best at learning_rate 0.05 with hidden units (8, 4); batch size adds a little."""
    rate = assignment.get("model.learning_rate", 0.05)
    units = tuple(assignment.get("model.hidden_units", (8, 4)))
    batch = assignment.get("train.batch_size", 16)
    return round(0.9 - 0.1 * abs(math.log10(rate / 0.05)) - (0.0 if units == (8, 4) else 0.05)
                 - 0.001 * abs(batch - 16), 6)


class FakeTrials:
    """The runner (module docstring). ``fails(assignment)``: the trial raises (after
    ``delay`` seconds, or ``delay(assignment)``);
    ``curve(assignment, step)``: its intermediate value at ``step`` (reported at ``steps``)."""

    def __init__(self, calls: Path | None = None, *, fails: Callable[[dict], bool] = None,
                 delay: float | Callable[[dict], float] = 0.0, curve: Callable[[dict, int], float] | None = None,
                 steps: tuple[int, ...] = (10, 20, 30)) -> None:
        self.calls, self.fails, self.delay = calls, fails, delay
        self.curve, self.steps = curve, steps
        self.runs: list[TrialRun] = []

    def __call__(self, trial: TrialRun) -> Outcome:
        self.runs.append(trial)
        if self.calls is not None:
            with open(self.calls, "a") as f:
                f.write(json.dumps({"number": trial.number, "pid": os.getpid(),
                                    "time": time.time(),
                                    "assignment": {k: list(v) if isinstance(v, tuple) else v
                                                   for k, v in trial.assignment.items()}})
                        + "\n")
        trial.folder.mkdir(parents=True, exist_ok=True)
        delay = self.delay(trial.assignment) if callable(self.delay) else self.delay
        end = time.monotonic() + delay
        while time.monotonic() < end:
            if trial.cancelled.wait(0.05):
                raise TrialError("cancelled: the search stopped")
        if self.fails is not None and self.fails(trial.assignment):
            raise RuntimeError(f"bad values {trial.assignment}")
        if trial.intermediate and self.curve is not None:
            for step in self.steps:
                value = self.curve(trial.assignment, step)
                if trial.report(step, value):
                    raise Pruned(step, value)
        value = score(trial.assignment)
        return Outcome(value, {"auc": value, "examples": 48}, {"train": delay})


def calls(path: Path) -> list[dict]:
    """The logged calls."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


if __name__ == "__main__":
    spec, out, study, log, delay = sys.argv[1:6]
    run(entry.load_pipeline(spec), "unused-examples", "unused-transformed", out,
        study_dir=study, study_key=STUDY_KEY,
        trial_runner=FakeTrials(Path(log), delay=float(delay)))
    sys.stdout.flush()
    os._exit(0)

"""Run one user step: import its function, call it, write its result.

The function gets each input artifact's directory and each output's (emptied first: a retried
or resumed step starts clean), and its parameters as declared. What it returns (None, a
mapping or a ``NamedTuple`` of JSON scalars) is its result, written to ``result.json`` in the
step's result artifact: the step's metrics in the run's record, and what a later step's
``when`` reads. A result missing a name its ``NamedTuple`` declares, or holding a value that is
not a JSON scalar, fails the step, naming it. What the function prints becomes the step's
progress lines (``[step 1.2s] ...``): the runner shows them as it shows a built-in step's.

A mapped step runs once per item (:func:`run_item`: the item's parameters, its own artifacts),
then :func:`collect` gathers the items: each output ``out`` gets ``0/``, ``1/``, ... (a copy of
each item's) and ``items.json`` (each item's parameters); its result is ``{"items": [...]}``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from estflow.components._io.jsonfile import write_json
from estflow.components._runtime import entry
from estflow.dsl.pipeline import Pipeline
from estflow.dsl.steps import ITEMS_FILE
from estflow.dsl.steps import RESULT_FILE
from estflow.dsl.steps import StepFunction
from estflow.dsl.steps import UserStep
from estflow.dsl.steps import item_name
from estflow.dsl.steps import result_artifact

__all__ = ["run", "run_item", "collect", "find_step", "StepResultError"]


class StepResultError(ValueError):
    """The function's return value is not a result estflow can record."""


def find_step(pipeline: Pipeline, name: str) -> UserStep:
    """The user step ``name`` of ``pipeline`` (a clear error when the spec has none)."""
    for declared in pipeline.steps:
        if declared.name == name:
            return declared
    raise ValueError(f"Received --step {name!r}, expected a user step of the spec, one of "
                     f"{[s.name for s in pipeline.steps]}")


def run(declared: UserStep, artifacts: Mapping[str, str], *,
        say=print) -> dict[str, Any]:
    """Call ``declared``'s function; returns (and writes) its result.

    Args:
        declared: the step.
        artifacts: artifact name -> directory, for its inputs and outputs (its result artifact
            among them).
    """
    function = entry.resolve(declared.fn)
    if isinstance(function, StepFunction):
        function = function.python_func
    kwargs: dict[str, Any] = dict(declared.arguments())
    for port in declared.inputs:
        kwargs[port.name] = Path(artifacts[port.name])
    for port in (*declared.outputs,):
        kwargs[port.name] = _empty(Path(artifacts[port.name]))
    result_dir = _empty(Path(artifacts[declared.result_artifact]))
    say(f"calling {declared.fn}({', '.join(sorted(kwargs))})")
    lines = _Lines(say, sys.stdout)
    try:
        with contextlib.redirect_stdout(lines):  # its prints: progress lines of the step
            returned = function(**kwargs)
    finally:
        lines.flush()
    found = _as_result(returned, declared)
    write_json(result_dir / RESULT_FILE, found)
    if found:
        say("result: " + ", ".join(f"{k}={v!r}" for k, v in found.items()))
    return found


def run_item(declared: UserStep, index: int, artifacts: Mapping[str, str], *,
             say=print) -> dict[str, Any]:
    """Run item ``index`` of mapped step ``declared`` (:func:`run` with the item's parameters);
    ``artifacts`` as its row names them (``out_<index>``, ``<name>_<index>_result``)."""
    one = dataclasses.replace(declared, over="", parameters=json.dumps(
        declared.item_arguments(index), sort_keys=True))
    name = item_name(declared.name, index)
    mine = {**{p.name: artifacts[p.name] for p in declared.inputs},
            **{p.name: artifacts[item_name(p.name, index)] for p in declared.outputs},
            declared.result_artifact: artifacts[result_artifact(name)]}
    say(f"item {index}: {json.dumps(declared.items[index], sort_keys=True)}")
    return run(one, mine, say=say)


def collect(declared: UserStep, artifacts: Mapping[str, str], *,
            say=print) -> dict[str, Any]:
    """Collect mapped step ``declared``'s items: each output ``out`` gets ``<i>/`` (a copy of
    item ``i``'s ``out_<i>``) and :data:`~estflow.dsl.steps.ITEMS_FILE` (each item's
    parameters); its result artifact ``{"items": [result_0, ...]}``; returns the result."""
    count = len(declared.items)
    parameters = [declared.item_arguments(i) for i in range(count)]
    for port in declared.outputs:
        folder = _empty(Path(artifacts[port.name]))
        for i in range(count):
            shutil.copytree(artifacts[item_name(port.name, i)], folder / str(i),
                            symlinks=True)
        write_json(folder / ITEMS_FILE, parameters)
    results = []
    for i in range(count):
        path = Path(artifacts[result_artifact(item_name(declared.name, i))]) / RESULT_FILE
        results.append(json.loads(path.read_text()) if path.is_file() else {})
    found = {"items": results}
    write_json(_empty(Path(artifacts[declared.result_artifact])) / RESULT_FILE, found)
    say(f"collected {count} items" + (f" of {', '.join(p.name for p in declared.outputs)}"
                                      if declared.outputs else ""))
    return found


class _Lines(io.TextIOBase):
    """A text stream passing each whole line written to ``say`` (the step's progress lines,
    which the runner shows; a partial last line when flushed at the end)."""

    def __init__(self, say, real) -> None:
        self.say, self.real, self.pending = say, real, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            self._say(line)
        return len(text)

    def flush(self) -> None:
        if self.pending:
            line, self.pending = self.pending, ""
            self._say(line)

    def _say(self, line: str) -> None:
        with contextlib.redirect_stdout(self.real):  # ``say`` prints
            self.say(line)


def _empty(folder: Path) -> Path:
    """``folder``, created and emptied (an earlier attempt's files removed)."""
    if folder.exists():
        for child in folder.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _as_result(value: Any, declared: UserStep) -> dict[str, Any]:
    where = f"{declared.fn} (step {declared.name!r})"
    if value is None:
        found: dict[str, Any] = {}
    elif hasattr(value, "_asdict"):
        found = dict(value._asdict())
    elif isinstance(value, Mapping):
        found = dict(value)
    else:
        raise StepResultError(f"{where} returned {type(value).__name__} {value!r}, expected "
                              "None, a mapping or a NamedTuple of JSON scalars")
    for key, item in found.items():
        if hasattr(item, "item") and callable(item.item):  # a numpy scalar
            item = found[key] = item.item()
        if not isinstance(key, str) or not (
                item is None or isinstance(item, (bool, int, str))
                or (isinstance(item, float) and math.isfinite(item))):
            raise StepResultError(f"{where} returned {key!r}: {item!r}, expected a JSON scalar "
                                  "(str, int, finite float, bool, None) for each name")
    missing = [k for k in declared.returns if k not in found]
    if missing:
        raise StepResultError(f"{where} returned {sorted(found)}, expected every name its "
                              f"NamedTuple declares: {list(declared.returns)} (missing "
                              f"{missing})")
    return found

"""Entry-point glue shared by the steps: spec loading, user-function resolution, progress.

Each step module (``estflow.components.<step>``) has ``run(pipeline, ...)`` doing the work and
``main(argv)`` parsing arguments; the local runner and the KFP task both call ``main``. All
reading of the environment happens in ``main`` (the edge), never below it.
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import importlib.util
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from estflow.dsl.contracts import Step
from estflow.dsl.contracts import add_options
from estflow.dsl.pipeline import Pipeline
from estflow.dsl.refs import CallableRef

__all__ = ["step_parser", "load_pipeline", "resolve", "resolve_source_root", "Progress",
           "exit_after", "leave"]


class _StepParser(argparse.ArgumentParser):
    """argparse reads ``--beam-options --runner=X`` as two options; a KFP task passes a
    parameter's value as its own argument, whatever it starts with. A text option's next
    argument is therefore always its value."""

    text_flags: tuple[str, ...] = ()

    def parse_known_args(self, args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        joined, i = [], 0
        while i < len(args):
            if args[i] in self.text_flags and i + 1 < len(args):
                joined.append(f"{args[i]}={args[i + 1]}")
                i += 2
            else:
                joined.append(args[i])
                i += 1
        return super().parse_known_args(joined, namespace)


def step_parser(step: Step, description: str | None = None) -> argparse.ArgumentParser:
    """The argument parser of a step's entry point, built from its contract (dsl/contracts.py):
    ``--spec``, one ``--<artifact>`` per input and output artifact, then the step's options.
    The runners build the same arguments from the same :class:`Step`, so they cannot differ.
    A Beam step parses with ``parse_known_args``: the rest are Beam pipeline options."""
    parser = _StepParser(prog=step.module, description=description,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.text_flags = tuple(f"--{o.flag}" for o in step.options if o.type == "str")
    parser.add_argument("--spec", required=True, help="pipeline spec: JSON file path or text")
    for artifact in step.inputs:
        parser.add_argument(f"--{artifact}", required=True, metavar="DIR",
                            help=f"input artifact: {artifact}")
    for artifact in step.outputs:
        parser.add_argument(f"--{artifact}", required=True, metavar="DIR",
                            help=f"output artifact: {artifact}")
    add_options(parser, step.options)
    return parser


def load_pipeline(spec: str) -> Pipeline:
    """Read a Pipeline from a JSON file path, or from JSON text (what a KFP task receives)."""
    text = spec if spec.lstrip().startswith("{") else Path(spec).read_text()
    return Pipeline.from_json(text)


def resolve(ref: CallableRef) -> Callable:
    """Import the function a :class:`CallableRef` points to (from its module, or its file)."""
    try:
        module = importlib.import_module(ref.module)
    except ImportError:
        if not ref.file:
            raise ImportError(f"cannot import module {ref.module!r} for {ref}; is the package "
                              "that declares it installed in this environment/image?") from None
        module = _load_file(ref.module, ref.file)
    target: Any = module
    for part in ref.name.split("."):
        target = getattr(target, part)
    return target


def _load_file(name: str, file: str):
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {file!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folder = str(Path(file).parent)
    if folder not in sys.path:  # as `python file.py`: the user's modules beside it import
        sys.path.insert(0, folder)
    # From the source, never a cached .pyc (which a same-second, same-size edit passes)
    exec(compile(Path(file).read_bytes(), str(file), "exec", dont_inherit=True), module.__dict__)
    return module


def resolve_source_root(text: str | None) -> Path:
    """Directory against which relative data paths resolve: a path, or ``module:pkg.mod`` (the
    directory of that module, e.g. where an example pipeline and its data are installed)."""
    if not text:
        return Path.cwd()
    if text.startswith("module:"):
        spec = importlib.util.find_spec(text[len("module:"):])
        if spec is None or spec.origin is None:
            raise ImportError(f"cannot find module {text[len('module:'):]!r} for the source root")
        return Path(spec.origin).parent
    return Path(text)


class Progress:
    """Progress lines for one step: ``[step elapsed] message``, flushed immediately so a
    runner streaming the subprocess output shows them live. A ``part`` of a step (another
    step's work done inside it) prefixes its messages: ``[preprocess 3.1s] ingest: ...``."""

    def __init__(self, step: str, part: str | None = None) -> None:
        self.step, self.part = step, part
        self.start = time.monotonic()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def __call__(self, message: str) -> None:
        shown = f"{self.part}: {message}" if self.part else message
        print(f"[{self.step} {self.elapsed:6.1f}s] {shown}", flush=True)




def exit_after(main: Callable[[], int]) -> None:
    """Run a step's ``main`` and leave the process with its exit status, skipping the
    interpreter's teardown: ~0.7 s for a process that imported TensorFlow (measured here:
    freeing its modules, not work), once per step of every run. The atexit handlers still run
    (temporary files, absl) and the output streams and logging are flushed; every file a step
    writes is closed before ``main`` returns (the summary writers are flushed at the end of
    training and evaluation). An exception (Ctrl-C included) leaves the usual way."""
    code = main()
    code = code if isinstance(code, int) else 1
    atexit._run_exitfuncs()  # noqa: SLF001 - what a normal exit runs first
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    leave(code)


def leave(code: int) -> None:
    """Leave the process at once with ``code`` (:func:`os._exit`), after the
    :data:`BEFORE_EXIT` calls (a warm or forked process tells its runner)."""
    for report in BEFORE_EXIT:
        report(code)
    os._exit(code)


BEFORE_EXIT: list[Callable[[int], None]] = []
"""Called with the exit status by :func:`exit_after`, last, before the process leaves."""

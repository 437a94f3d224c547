"""Entry-point glue shared by the steps: spec loading, user-function resolution, progress.

Each step module (``estflow.components.<step>``) has ``run(pipeline, ...)`` doing the work and
``main(argv)`` parsing arguments; the local runner and the KFP task both call ``main``. All
reading of the environment happens in ``main`` (the edge), never below it.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from estflow.dsl.contracts import Files
from estflow.dsl.pipeline import Pipeline
from estflow.dsl.refs import CallableRef

__all__ = ["load_pipeline", "resolve", "resolve_source_root", "Progress", "write_json",
           "read_json", "quiet_tensorflow"]


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
    spec.loader.exec_module(module)
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
    """Progress lines for one step: ``[step] message (elapsed)``, flushed immediately so a
    runner streaming the subprocess output shows them live."""

    def __init__(self, step: str) -> None:
        self.step = step
        self.start = time.monotonic()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def __call__(self, message: str) -> None:
        print(f"[{self.step} {self.elapsed:6.1f}s] {message}", flush=True)


def write_json(path: str | os.PathLike, value: Any) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)


def read_json(path: str | os.PathLike) -> Any:
    return json.loads(Path(path).read_text())


def quiet_tensorflow() -> None:
    """Silence TensorFlow's C++ start-up chatter; call before importing TensorFlow."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


SPEC_FILE = Files.SPEC

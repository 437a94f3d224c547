"""Load a declared Pipeline from a Python file or module (``path/to/file.py[:attr]``)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import sysconfig
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import estflow.dsl
from estflow.dsl.pipeline import Pipeline

__all__ = ["LoadedPipeline", "PipelineFileError", "load"]


class PipelineFileError(Exception):
    """Running the pipeline's file (or a module it imports) raised ``error``: where it did
    (``file``, ``line``; None when unknown) and, when that is another module, the line of
    the pipeline file that led there (``via``).

    ``str()`` is one message, ``file:line: ErrorType: message``."""

    def __init__(self, error: BaseException, file: str | None, line: int | None,
                 via: tuple[str, int] | None = None) -> None:
        self.error, self.file, self.line, self.via = error, file, line, via
        super().__init__(self.describe())

    @property
    def location(self) -> str:
        """``file:line`` (``file`` relative to the working directory when under it)."""
        if self.file is None:
            return "<unknown>"
        return f"{_shown(self.file)}:{self.line}" if self.line else _shown(self.file)

    def describe(self, with_type: bool = True) -> str:
        error = self.error
        text = error.msg if isinstance(error, SyntaxError) and error.msg else str(error)
        what = f"{type(error).__name__}: {text}" if with_type else text
        via = f" (imported from {_shown(self.via[0])}:{self.via[1]})" if self.via else ""
        return f"{self.location}: {what}{via}"


class LoadedPipeline:
    """A Pipeline plus where it came from: ``module`` (importable name) and ``source_root``
    (the directory relative data paths resolve against, or ``module:NAME``)."""

    def __init__(self, pipeline: Pipeline, module: str, file: Path, importable: bool) -> None:
        self.pipeline = pipeline
        self.module = module
        self.file = file
        self.importable = importable

    @property
    def local_source_root(self) -> str:
        return str(self.file.parent)

    @property
    def portable_source_root(self) -> str:
        """Deterministic across machines when the module is importable (installed packages)."""
        return f"module:{self.module}" if self.importable else str(self.file.parent)


def load(target: str) -> LoadedPipeline:
    """Load ``target``: ``file.py``, ``file.py:attr``, ``package.module`` or
    ``package.module:attr``. Without ``attr``, the module must hold exactly one Pipeline.

    Raises:
        FileNotFoundError: the file does not exist.
        ModuleNotFoundError: no module ``package.module`` exists.
        PipelineFileError: running the file (or a module it imports) raised; it names the
            file and line (the original error is its ``error``, a ``DslError`` or
            ``DslErrors`` for an invalid declaration).
        ValueError: the module holds no Pipeline, or several and no ``attr`` was given.
    """
    path_part, _, attr = target.partition(":")
    if path_part.endswith(".py") or "/" in path_part:
        file = Path(path_part).resolve()
        if not file.is_file():
            raise FileNotFoundError(f"pipeline file not found: {path_part}")
        module_name = _importable_name(file)
        importable = module_name is not None
        module = _running(file, (lambda: importlib.import_module(module_name)) if importable
                          else (lambda: _exec_file(file)))
        module_name = module.__name__
    else:
        try:  # imports the parent packages
            spec = importlib.util.find_spec(path_part)
        except ModuleNotFoundError:  # a missing package: not the user's code failing
            raise
        except Exception as err:
            raise _located(err, Path(path_part)) from err
        if spec is None:
            raise ModuleNotFoundError(f"No module named {path_part!r}", name=path_part)
        file = Path(spec.origin or ".").resolve()
        module = _running(file, lambda: importlib.import_module(path_part))
        module_name, importable = module.__name__, True
    return LoadedPipeline(_pick(module, attr, target), module_name, file, importable)


def _running(file: Path, run: Callable[[], ModuleType]) -> ModuleType:
    """``run()``, which runs the user's module; what it raises becomes a PipelineFileError
    naming the user's line (KeyboardInterrupt and SystemExit pass through)."""
    try:
        return run()
    except Exception as err:
        raise _located(err, file) from err


# Frames in these directories are not the user's code: the error is located at the user's line
# that called into them.
_NOT_USER = tuple(str(Path(p).resolve()) + os.sep for p in {
    *(sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")),
    os.path.dirname(estflow.dsl.__file__), os.path.dirname(__file__)})


def _located(err: Exception, file: Path) -> PipelineFileError:
    frames = [f for f in traceback.extract_tb(err.__traceback__)
              if not f.filename.startswith("<")]
    target = str(file)
    user = [f for f in frames if f.filename == target
            or not str(Path(f.filename).resolve()).startswith(_NOT_USER)]
    in_target = [f for f in frames if f.filename == target]
    if isinstance(err, SyntaxError) and err.filename:
        where, line = err.filename, err.lineno
    elif user:
        where, line = user[-1].filename, user[-1].lineno
    else:
        where, line = target, None
    via = None
    if in_target and where != target:
        via = (target, in_target[-1].lineno)
    return PipelineFileError(err, where, line, via)


def _shown(path: str) -> str:
    relative = os.path.relpath(path) if os.path.isabs(path) else path
    return path if relative.startswith("..") else relative


def _importable_name(file: Path) -> str | None:
    """The dotted name under which ``file`` imports as itself, if any (e.g. an example inside
    the installed estflow package), so references to its functions work in any process."""
    parts = [file.stem]
    folder = file.parent
    while (folder / "__init__.py").exists():
        parts.insert(0, folder.name)
        folder = folder.parent
    names = [".".join(parts[i:]) for i in range(len(parts))]
    # Prefer the installed package's name (estflow.pipelines.examples.taxi) over the name the
    # same file has when the repository root is on sys.path (pipelines.examples.taxi): only the
    # former imports inside a container image.
    candidates = ["estflow." + n for n in names] + names
    for name in candidates:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.origin and Path(spec.origin).resolve() == file:
            return name
    return None


def _exec_file(file: Path):
    name = f"estflow_user_{file.stem}"
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    module.__estflow_file__ = str(file)  # read by dsl refs while the module body runs
    sys.modules[name] = module
    # As `python file.py`: its sibling modules import; only while it runs, so that the file
    # is not found by module name later (its refs must carry the file for the steps).
    sys.path.insert(0, str(file.parent))
    try:
        # From the source, never a cached .pyc: a file edited within the same second at the
        # same size (offer_cost=20.0 -> 30.0) would pass the .pyc check and run the old text
        exec(compile(file.read_bytes(), str(file), "exec", dont_inherit=True), module.__dict__)
    finally:
        sys.path.remove(str(file.parent))
    return module


def _pick(module, attr: str, target: str) -> Pipeline:
    if attr:
        value = getattr(module, attr, None)
        if not isinstance(value, Pipeline):
            raise ValueError(f"{target}: `{attr}` is not an estflow Pipeline "
                             f"(got {type(value).__name__})")
        return value
    found = {k: v for k, v in vars(module).items() if isinstance(v, Pipeline)}
    if len(found) != 1:
        raise ValueError(f"{target}: expected exactly one estflow Pipeline at module level, "
                         f"found {sorted(found) or 'none'}; name one with {target}:ATTR")
    return next(iter(found.values()))

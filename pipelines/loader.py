"""Load a declared Pipeline from a Python file or module (``path/to/file.py[:attr]``)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

from estflow.dsl.pipeline import Pipeline

__all__ = ["LoadedPipeline", "load"]


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
        ValueError: the module holds no Pipeline, or several and no ``attr`` was given.
    """
    path_part, _, attr = target.partition(":")
    if path_part.endswith(".py") or "/" in path_part:
        file = Path(path_part).resolve()
        if not file.is_file():
            raise FileNotFoundError(f"pipeline file not found: {path_part}")
        module_name = _importable_name(file)
        importable = module_name is not None
        module = importlib.import_module(module_name) if importable else _exec_file(file)
        module_name = module.__name__
    else:
        module = importlib.import_module(path_part)
        module_name, importable = module.__name__, True
        file = Path(module.__file__ or ".").resolve()
    return LoadedPipeline(_pick(module, attr, target), module_name, file, importable)


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
    spec.loader.exec_module(module)
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

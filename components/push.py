"""The push step: publish the exported SavedModel as ``<base>/<model_name>/<version>/``.

The layout is TF Serving's (and KServe's tensorflow runtime): a server watching the model base
path loads the highest integer version. A push never leaves a half-written version visible: the
files are copied under a temporary dot-name in the same directory, fsynced, then renamed into
place in one ``os.rename``. An existing version is never overwritten.

``python -m estflow.components.push --spec S --model DIR --evaluation DIR --pushed DIR``
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from estflow.components import _runtime
from estflow.dsl.contracts import Files
from estflow.dsl.pipeline import Pipeline

__all__ = ["run", "main", "push_directory", "list_versions"]

_TMP_PREFIX = ".tmp-"


def list_versions(model_base: Path) -> list[int]:
    """The published (integer-named) versions under ``model_base``, ascending."""
    if not model_base.is_dir():
        return []
    return sorted(int(p.name) for p in model_base.iterdir() if p.name.isdigit() and p.is_dir())


def _fsync_dir(folder: str | Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    for folder, _dirs, files in os.walk(root):
        for name in files:
            with open(os.path.join(folder, name), "rb") as f:
                os.fsync(f.fileno())
        _fsync_dir(folder)


def push_directory(export_dir: Path, model_base: Path, *, version: int | None = None,
                   keep_versions: int | None = None) -> Path:
    """Copy ``export_dir`` to ``model_base/<version>`` atomically and return the new path.

    Args:
        version: the version number; default: the current Unix time, or one more than the
            newest existing version if that is larger (versions only grow).
        keep_versions: delete all but the newest N versions after a successful push.

    Raises:
        FileExistsError: ``version`` is already published.
        FileNotFoundError: ``export_dir`` holds no ``saved_model.pb``.
    """
    if not (export_dir / "saved_model.pb").is_file():
        raise FileNotFoundError(f"no SavedModel to push: {export_dir}/saved_model.pb is missing")
    model_base.mkdir(parents=True, exist_ok=True)
    existing = list_versions(model_base)
    if version is None:
        version = max(int(time.time()), existing[-1] + 1 if existing else 0)
    final = model_base / str(version)
    if final.exists():
        raise FileExistsError(f"version {version} already exists at {final}; versions are "
                              "never overwritten")
    staging = model_base / f"{_TMP_PREFIX}{version}-{os.getpid()}"
    shutil.copytree(export_dir, staging)
    _fsync_tree(staging)
    os.rename(staging, final)  # atomic on one filesystem: the version appears whole or not at all
    _fsync_dir(model_base)
    if keep_versions:
        for old in list_versions(model_base)[:-keep_versions]:
            shutil.rmtree(model_base / str(old))
    return final


def run(pipeline: Pipeline, model_dir: str, evaluation_dir: str, pushed_dir: str,
        progress: _runtime.Progress | None = None) -> dict:
    """Push the trained model's export to the pipeline's push target."""
    progress = progress or _runtime.Progress("push")
    if pipeline.push is None:
        raise ValueError("the pipeline declares no push target (Pipeline.push is None)")
    metrics = _runtime.read_json(Path(evaluation_dir) / Files.METRICS)["metrics"]
    model_base = Path(pipeline.push.base_path).resolve() / pipeline.push.model_name
    final = push_directory(Path(model_dir) / Files.EXPORT, model_base,
                           keep_versions=pipeline.push.keep_versions)
    result = {"model_name": pipeline.push.model_name, "version": int(final.name),
              "path": str(final), "base_path": str(model_base.parent), "metrics": metrics}
    _runtime.write_json(Path(pushed_dir) / Files.PUSH_RESULT, result)
    progress(f"pushed version {final.name} to {final}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="estflow.components.push", description=__doc__)
    parser.add_argument("--spec", required=True, help="pipeline spec: JSON file or JSON text")
    parser.add_argument("--model", required=True, help="train output (export/)")
    parser.add_argument("--evaluation", required=True, help="evaluate output (metrics.json)")
    parser.add_argument("--pushed", required=True, help="output directory (push.json)")
    args = parser.parse_args(argv)
    run(_runtime.load_pipeline(args.spec), args.model, args.evaluation, args.pushed)
    return 0


if __name__ == "__main__":
    sys.exit(main())

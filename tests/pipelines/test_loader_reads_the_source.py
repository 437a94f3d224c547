"""A pipeline file is run from its source every time, never from a cached ``.pyc``: Python's
``.pyc`` check compares the file's mtime (whole seconds) and size, so an edit within the same
second that keeps the size (``offer_cost=20.0`` -> ``30.0``, as the docs' own-steps page does
with ``sed -i`` right after a run) would run the old text, and a user step's process would run
other code than the one its cache key was computed from. The mtime is set back explicitly here,
so the test does not depend on timing."""

from __future__ import annotations

import importlib.util
import os
import py_compile
import subprocess
import sys
from pathlib import Path

from estflow.pipelines import loader

PIPELINE = '''
import estflow.dsl as ef

OFFER_COST = 20.0

pipeline = ef.Pipeline(
    name="fresh", source=ef.CsvSource("data.csv"), features=(ef.Numeric("x"),),
    label=ef.Label("y"), model=ef.LinearClassifier(feature_columns=("x",)),
    train=ef.TrainSpec(max_steps=OFFER_COST))
'''.replace("max_steps=OFFER_COST", "max_steps=int(OFFER_COST)")


def _cache_bytecode(path: Path) -> None:
    """What an earlier process importing the file by name leaves (a step process in the
    pipeline's folder, where PYTHONDONTWRITEBYTECODE is not set): its ``__pycache__`` entry."""
    py_compile.compile(str(path), cfile=importlib.util.cache_from_source(str(path)),
                       doraise=True)


def _edit_keeping_mtime_and_size(path: Path, old: str, new: str) -> None:
    stat = path.stat()
    text = path.read_text()
    assert len(old) == len(new)
    path.write_text(text.replace(old, new))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size


def test_a_same_second_same_size_edit_is_seen_by_the_next_load(tmp_path):
    file = tmp_path / "fresh.py"
    file.write_text(PIPELINE)
    assert loader.load(str(file)).pipeline.train.max_steps == 20
    _cache_bytecode(file)
    _edit_keeping_mtime_and_size(file, "20.0", "30.0")
    assert loader.load(str(file)).pipeline.train.max_steps == 30


def test_a_step_process_loading_the_file_runs_the_edited_text(tmp_path):
    """What a step's process does (components/_runtime/entry.py), in a fresh interpreter, after
    the file's bytecode was cached."""
    file = tmp_path / "fresh_steps.py"
    file.write_text("VALUE = 20.0\n")
    _cache_bytecode(file)
    _edit_keeping_mtime_and_size(file, "20.0", "30.0")
    code = ("from estflow.components._runtime import entry; "
            f"print(entry._load_file('fresh_steps_x', {str(file)!r}).VALUE)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split()[-1] == "30.0"

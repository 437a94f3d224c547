"""A source kind declared outside estflow works in the steps' own processes, not only
in-process: the spec names the kind as ``"module:ClassName"``, and each step process imports
that module (which registers the kind's reader) when it reads the spec.

The kind (JSON lines) is written here into a temporary folder as a user would: ``my_kinds.py``
(the ``Source`` subclass and its reader's row) beside ``my_kinds_reader.py`` (the Beam reader,
imported by the row only when read), used by ``pipeline.py``, run with ``estflow run
pipeline.py`` from that folder (default environment: no ``ESTFLOW_*``). Then the same kind
declared in the pipeline file itself, read by a real ingest process from the spec; and the
error a step process gives when the module is not importable there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ESTFLOW = str(Path(sys.executable).parent / "estflow")
READER = Path(__file__).parent / "components" / "jsonl_reader.py"

KIND = '''
import dataclasses

from estflow.components._sources.registry import Reader
from estflow.components._sources.registry import late
from estflow.components._sources.registry import register
from estflow.dsl.sources import SchemaCheck
from estflow.dsl.sources import Source


@dataclasses.dataclass(frozen=True)
class JsonLinesSource(Source):
    path: str
    max_rejected_fraction: float = 0.01
    schema_check: SchemaCheck | None = None


register(JsonLinesSource, Reader("JSON lines", "*.jsonl",
                                 check=late("my_kinds_reader", "check"),
                                 files=late("my_kinds_reader", "read_file")))
'''

PIPELINE = '''
import estflow.dsl as ef
from my_kinds import JsonLinesSource

pipeline = ef.Pipeline(
    name="jsonl", source=JsonLinesSource("data.jsonl", max_rejected_fraction=0.2),
    features=(ef.Numeric("x", default=0.0), ef.Numeric("n", dtype="int")),
    label=ef.Label("label"), model=ef.LinearClassifier(feature_columns=("x", "n")),
    train=ef.TrainSpec(max_steps=10))
'''

# The kind declared in the pipeline file itself (its module is the file, run by the step).
PIPELINE_WITH_KIND = KIND + PIPELINE.replace("from my_kinds import JsonLinesSource\n", "")


def _rows() -> list[str]:
    rows = [json.dumps({"x": i / 10, "n": i % 7, "label": int(i % 3 == 0), "extra": "e"})
            for i in range(40)]
    rows[5] = '{"x": "abc", "n": 1, "label": 0}'  # text in a float column
    rows[9] = "not json"                           # not an object
    return rows


def _folder(tmp_path: Path, pipeline: str, kinds: bool = True) -> Path:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "data.jsonl").write_text("\n".join(_rows()) + "\n")
    shutil.copy(READER, tmp_path / "my_kinds_reader.py")
    if kinds:
        (tmp_path / "my_kinds.py").write_text(KIND)
    (tmp_path / "pipeline.py").write_text(pipeline)
    return tmp_path


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("ESTFLOW_", "PYTEST"))}


def _ingested(examples: Path) -> tuple[dict, list[dict]]:
    summary = json.loads((examples / "ingest.json").read_text())
    rejected = [json.loads(line) for line in (examples / "rejected.jsonl").read_text()
                .splitlines()]
    return summary, rejected


def _check_ingest(summary: dict, rejected: list[dict]) -> None:
    assert summary["read"] == 40 and summary["rejected"] == 2
    assert summary["schema"]["unseen_columns"] == ["extra"]
    assert sorted(r["line"] for r in rejected) == [6, 10]


def test_estflow_run_reads_a_kind_declared_in_the_users_module(tmp_path):
    folder = _folder(tmp_path, PIPELINE)

    done = subprocess.run([ESTFLOW, "run", "pipeline.py"], cwd=folder, env=_env(),
                          capture_output=True, text=True, timeout=900)

    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    run_id = next(line.split()[1].rstrip(":") for line in done.stdout.splitlines()
                  if line.startswith("Run "))
    workdir = folder / "estflow_runs" / "jsonl" / run_id
    record = json.loads((workdir / "run.json").read_text())
    assert {name: step["status"] for name, step in record["steps"].items()} == {
        "ingest": "ran", "transform": "ran", "train": "ran", "evaluate": "ran"}
    ingest = record["steps"]["ingest"]
    assert ingest["metrics"]["source"] == "JsonLinesSource"
    assert ingest["metrics"]["read"] == 40 and ingest["metrics"]["rejected"] == 2
    assert ingest["metrics"]["train"] + ingest["metrics"]["eval"] == 38
    _check_ingest(*_ingested(Path(ingest["outputs"]["examples"]["path"])))
    spec = json.loads((workdir / "pipeline.json").read_text())
    assert spec["source"]["kind"] == "my_kinds:JsonLinesSource"


def _spec(folder: Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The spec ``estflow run`` gives its steps, from the pipeline file (a fresh process
    without its working directory on the path (``-P``), as the ``estflow`` command)."""
    code = ("import sys; from estflow.pipelines import loader; "
            "sys.stdout.write(loader.load('pipeline.py').pipeline.to_json())")
    return subprocess.run([sys.executable, "-P", "-c", code], cwd=cwd or folder, env=_env(),
                          capture_output=True, text=True, timeout=300, check=True)


def _ingest(spec: Path, out: Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "estflow.components.ingest", "--spec", str(spec),
         "--examples", str(out), "--source-root", str(spec.parent)],
        cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600)


def test_a_step_process_reads_a_kind_declared_in_the_pipeline_file(tmp_path):
    folder = _folder(tmp_path / "project", PIPELINE_WITH_KIND, kinds=False)
    text = _spec(folder).stdout
    source = json.loads(text)["source"]
    assert source["kind"] == "estflow_user_pipeline:JsonLinesSource"
    assert source["kind_file"] == str(folder / "pipeline.py")
    (folder / "spec.json").write_text(text)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    done = _ingest(folder / "spec.json", tmp_path / "examples", cwd=elsewhere)

    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    _check_ingest(*_ingested(tmp_path / "examples"))


def test_a_step_process_that_cannot_import_the_kinds_module_says_so(tmp_path):
    folder = _folder(tmp_path / "project", PIPELINE)
    text = _spec(folder).stdout
    assert json.loads(text)["source"]["kind"] == "my_kinds:JsonLinesSource"
    assert "kind_file" not in json.loads(text)["source"]
    (folder / "spec.json").write_text(text)
    elsewhere = tmp_path / "elsewhere"  # my_kinds is not on this process's path
    elsewhere.mkdir()

    done = _ingest(folder / "spec.json", tmp_path / "examples", cwd=elsewhere)

    out = done.stdout + done.stderr
    assert done.returncode != 0
    assert "my_kinds:JsonLinesSource" in out and "cannot import module 'my_kinds'" in out
    assert "installed" in out and "PYTHONPATH" in out

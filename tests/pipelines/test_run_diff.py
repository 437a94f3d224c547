"""``estflow runs diff``'s reasons (pipelines/cli/run_diff.py): functions named by what of
them changed, and each step's key change explained by what its key covers."""

from pathlib import Path

from estflow.pipelines.cli import run_diff
from estflow.pipelines.local import runs


def _record(run: str, steps: dict) -> runs.RunRecord:
    return runs.RunRecord(Path("/nowhere") / run / "run.json", {
        "run": run, "steps": steps, "estflow": "1", "estflow_code": {"code": {"train": "c"}}})


def _function(digest: str, **parts: str) -> dict:
    return {"function": "model_fn", "digest": digest, "parts": parts}


def test_a_helper_change_is_named_and_explains_the_steps_that_run_the_function():
    a, b = (_record(r, {"train": {"key": k, "status": s}, "ingest": {"key": "i", "status": s}})
            for r, k, s in (("r1", "k1", "ran"), ("r2", "k2", "reused")))
    fa = {"code": {"model.model_fn": _function("d1", model_fn="m", scale="s1")},
          "steps": {"train": {"context": {"code": {"model.model_fn": "d1"}}, "inputs": {}}}}
    fb = {"code": {"model.model_fn": _function("d2", model_fn="m", scale="s2")},
          "steps": {"train": {"context": {"code": {"model.model_fn": "d2"}}, "inputs": {}}}}
    assert run_diff.function_changes(a, b, fa, fb) == {
        "model.model_fn": "model_fn: helper scale changed"}
    lines = run_diff.step_lines(a, b, fa, fb)
    assert lines[0].endswith("ran -> reused: model.model_fn model_fn: helper scale changed")
    assert lines[1] == "  ingest: same key (i); ran -> reused"


def test_a_function_s_file_and_module_are_placement_in_no_key():
    functions = {"derive.fn": {}}
    assert run_diff.is_placement("derive.fn.file", functions, {})
    assert run_diff.is_placement("derive.fn.module", functions, {})
    assert not run_diff.is_placement("derive.fn.name", functions, {})
    assert run_diff.is_placement("source.path", functions, {"by_content": True})
    assert not run_diff.is_placement("source.path", functions, {})

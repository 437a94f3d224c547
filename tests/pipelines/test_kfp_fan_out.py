"""A mapped step (``score.map(threshold=[...])``) compiled for Kubeflow: its items are one task
template ``score_item`` in a ``dsl.ParallelFor`` over the fingerprint task's list output
``score_items`` (each item's index, projected spec and cache key; passed through a one-output
task ``score-items``, as kfp.local needs), and its task ``score``
collects their artifacts (``dsl.Collected``, ``Input[List[Artifact]]``) with the real entry
point; the step reading its output reads the collected artifact. The IR is read strictly
(:mod:`kfp_ir`); ``kfp.local``'s SubprocessRunner runs it (built-in steps and the fingerprint
task as stand-ins, the user steps for real). Backends before 2.17 are refused (a ParallelFor
group in the exit handler)."""

import dataclasses
import json
import sys
from pathlib import Path

import pytest

import estflow.dsl as ef
from estflow.dsl.contracts import Files
from estflow.pipelines import loader
from estflow.pipelines.kubeflow import compiler as kfp_compiler
from tests.pipelines.kfp_ir import Ir
from tests.pipelines.test_kfp_user_steps import BUCKET
from tests.pipelines.test_kfp_user_steps import IMAGE
from tests.pipelines.test_kfp_user_steps import TAXI
from tests.pipelines.test_kfp_user_steps import _compile_with_stand_ins
from tests.pipelines.test_kfp_user_steps import _run
from tests.pipelines.test_kfp_user_steps import _with_steps

_STEPS_MODULE = """
import json
import os

import estflow.dsl as ef


def _log(name):
    with open(os.environ["ESTFLOW_TEST_LOG"], "a") as log:
        log.write(name + "\\n")


@ef.step
def score(evaluation: ef.Input[ef.Evaluation], scores: ef.Output[ef.Dataset],
          threshold: float = 0.5, label: str = "t") -> dict:
    _log("score:%s" % threshold)
    auc = json.loads((evaluation / METRICS).read_text())["metrics"]["auc"]
    (scores / "score.json").write_text(json.dumps({"threshold": threshold, "label": label}))
    return {"threshold": threshold, "above": auc >= threshold}


@ef.step
def summarize(scores: ef.Input[ef.Dataset]) -> dict:
    items = json.loads((scores / "items.json").read_text())
    seen = [json.loads((scores / str(i) / "score.json").read_text())["threshold"]
            for i in range(len(items))]
    _log("summarize:" + ",".join(map(str, seen)))
    return {"items": len(items)}
"""


@pytest.fixture(scope="module")
def taxi():
    loaded = loader.load(TAXI)
    loaded.pipeline = dataclasses.replace(loaded.pipeline, push=dataclasses.replace(
        loaded.pipeline.push, base_path=BUCKET))
    return loaded


@pytest.fixture
def steps_module(tmp_path, monkeypatch):
    (tmp_path / "kfp_fan_out_steps.py").write_text(
        f"METRICS = {Files.METRICS!r}\n" + _STEPS_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "kfp_fan_out_steps", raising=False)
    import kfp_fan_out_steps
    yield kfp_fan_out_steps
    sys.modules.pop("kfp_fan_out_steps", None)


def _pipeline(taxi, m) -> ef.Pipeline:
    return _with_steps(taxi, m.score.map(threshold=[0.3, 0.5, 0.7], label="daily"),
                       m.summarize)


def test_the_items_are_a_parallel_for_and_the_reader_gets_them_collected(
        taxi, steps_module, tmp_path):
    compiled = kfp_compiler.compile_pipeline(_pipeline(taxi, steps_module),
                                             tmp_path / "fan_out.yaml", image=IMAGE,
                                             kfp_backend="2.17")
    ir = Ir(compiled.path)  # strict: every field known
    documents = ir.documents
    text = Path(compiled.path).read_text()
    loops = [name for name, t in ir.spec.root.dag.tasks.items()] + [
        name for c in ir.spec.components.values() for name, t in c.dag.tasks.items()
        if t.WhichOneof("iterator") == "parameter_iterator"]
    assert any(n.startswith("for-loop") for n in loops), loops
    loop = next(t for c in ir.spec.components.values() for t in c.dag.tasks.values()
                if t.WhichOneof("iterator") == "parameter_iterator")
    # over the fingerprint task's per-item list, passed through the one-output task
    # score-items (kfp.local 2.17 reads a loop's items only from a task's single ``Output``)
    assert loop.parameter_iterator.items.input_parameter == "pipelinechannel--score-items-Output"
    passing = next(t for c in ir.spec.components.values() for n, t in c.dag.tasks.items()
                   if n == "score-items")
    assert passing.inputs.parameters["items"].task_output_parameter.output_parameter_key == \
        "score_items"
    collector = ir.spec.components["comp-score"].input_definitions.artifacts
    assert collector["scores_list"].is_artifact_list
    assert collector["score_result_list"].is_artifact_list
    assert "summarize" in text and "score-item" in text
    assert documents  # the YAML loaded back


def test_a_backend_before_217_is_refused_naming_the_mapped_step(taxi, steps_module,
                                                                 tmp_path):
    with pytest.raises(kfp_compiler.CompileError, match=r"mapped steps \['score'\].*2\.17"):
        kfp_compiler.compile_pipeline(_pipeline(taxi, steps_module), tmp_path / "old.yaml",
                                      image=IMAGE, kfp_backend="2.16")


def test_kfp_local_runs_every_item_and_collects_them(taxi, steps_module,
                                                     tmp_path):
    yaml_path = _compile_with_stand_ins(_pipeline(taxi, steps_module), tmp_path, "2.17")
    ran, output = _run(yaml_path, tmp_path, auc=0.6, blessed=True)
    assert sorted(r for r in ran if r.startswith("score:")) == [
        "score:0.3", "score:0.5", "score:0.7"], output[-4000:]
    assert "summarize:0.3,0.5,0.7" in ran
    assert ran.index("summarize:0.3,0.5,0.7") > max(
        ran.index(f"score:{t}") for t in (0.3, 0.5, 0.7))
    [result] = (tmp_path / "root").glob("*/score/score_result/result.json")
    assert [i["threshold"] for i in json.loads(result.read_text())["items"]] == [0.3, 0.5, 0.7]
    assert [i["above"] for i in json.loads(result.read_text())["items"]] == [True, True, False]

"""``ef.Candidates`` end to end: ``estflow run`` of a pipeline file with a linear and a DNN
candidate, from the pipeline's directory, in the default environment, on a small generated
CSV, pushing to a relative folder.

One workspace for the module, its runs in order: the first run trains and evaluates each
candidate, select picks the blessed one with the higher AUC (the expectation is computed from
the candidates' own evaluation files) and push publishes its export; an identical rerun reuses
the candidates and pushes nothing; editing the DNN reruns the DNN's steps only; a threshold no
candidate meets pushes nothing, with status 3 (not blessed) and no candidate picked.
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest

from estflow.pipelines import loader
from estflow.pipelines.local.schedule import Budget
from estflow.pipelines.local.schedule import core_shares
from estflow.pipelines.plan import build_plan
from tests.user_runs import estflow_run
from tests.user_runs import run_record
from tests.user_runs import statuses

pytestmark = pytest.mark.slow

NAMES = ("dnn", "linear")

PIPELINE = '''
import json

import estflow.dsl as ef


@ef.step(when=ef.blessed())
def announce(evaluation: ef.Input[ef.Evaluation], pushed: ef.Input[ef.Pushed]) -> dict:
    blessing = json.loads((evaluation / "blessing.json").read_text())
    return {"candidate": blessing["candidate"],
            "version": json.loads((pushed / "push.json").read_text()).get("version")}


pipeline = ef.Pipeline(
    name="cands",
    source=ef.CsvSource("data.csv"),
    features=(ef.Numeric("x"), ef.Numeric("z"), ef.CategoricalVocab("c")),
    label=ef.Label("y"),
    model=ef.Candidates({
        "linear": ef.LinearClassifier(feature_columns=("x", "z", "c")),
        "dnn": ef.DNNClassifier(hidden_units=(8, 4),
                                feature_columns=("x", "z", ef.Indicator("c"))),
    }),
    train=ef.TrainSpec(max_steps=30, batch_size=32),
    push=ef.PushTarget("served", "cands"),
    steps=(announce,),
)
'''


def _run(folder: Path) -> subprocess.CompletedProcess:
    return estflow_run(folder, "cands.py")


def _shown(done: subprocess.CompletedProcess) -> str:
    return done.stdout[-4000:] + done.stderr[-2000:]


def _run_dir(folder: Path) -> Path:
    return sorted(p for p in (folder / "estflow_runs" / "cands").iterdir()
                  if (p / "run.json").exists())[-1]


def _record(folder: Path) -> dict:
    return run_record(folder, "cands")


_statuses = statuses


def _output(record: dict, step: str, artifact: str) -> Path:
    return Path(record["steps"][step]["outputs"][artifact]["path"])


def _fingerprint(record: dict, step: str, artifact: str) -> str:
    return record["steps"][step]["outputs"][artifact]["fingerprint"]


def _versions(folder: Path) -> list[Path]:
    model = folder / "served" / "cands"
    return sorted(p for p in model.iterdir() if p.name.isdigit()) if model.is_dir() else []


def _own_evaluations(record: dict) -> dict[str, dict]:
    """Each candidate's own evaluation files: {name: {"auc", "blessed", "reasons"}}."""
    out = {}
    for name in NAMES:
        folder = _output(record, f"evaluate_{name}", f"evaluation_{name}")
        metrics = json.loads((folder / "metrics.json").read_text())["metrics"]
        blessing = json.loads((folder / "blessing.json").read_text())
        out[name] = {"auc": metrics["auc"], "blessed": blessing["blessed"],
                     "reasons": blessing["reasons"]}
    return out


def _best_blessed(own: dict[str, dict]) -> str | None:
    blessed = [n for n in sorted(own) if own[n]["blessed"]]
    return max(blessed, key=lambda n: (own[n]["auc"], -sorted(own).index(n)), default=None)


def _candidates_file(record: dict) -> dict:
    return json.loads((_output(record, "select", "evaluation") / "candidates.json").read_text())


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _summary_line(own: dict[str, dict], picked: str | None) -> str:
    ranked = sorted(sorted(own), key=lambda n: -own[n]["auc"])
    listed = ", ".join(f"{n} {own[n]['auc']:.4f}{'' if own[n]['blessed'] else ' (not blessed)'}"
                       for n in ranked)
    return f"Candidates by auc: {listed}; " + (f"picked {picked}" if picked else "none blessed")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("candidates")
    rng = random.Random(11)
    rows = ["x,z,c,y"]
    for _ in range(200):
        x, z, c = rng.random(), rng.random(), rng.choice("abc")
        y = int(x + 0.5 * z + (0.3 if c == "a" else 0.0) + rng.gauss(0, 0.15) > 0.9)
        rows.append(f"{x:.4f},{z:.4f},{c},{y}")
    (folder / "data.csv").write_text("\n".join(rows) + "\n")
    (folder / "cands.py").write_text(PIPELINE)
    return {"folder": folder}


def test_a_first_run_trains_every_candidate_and_pushes_the_best_blessed(workspace):
    folder = workspace["folder"]
    done = _run(folder)
    assert done.returncode == 0, _shown(done)
    record = _record(folder)
    assert _statuses(record) == {s: "ran" for s in (
        "ingest", "transform", "train_dnn", "train_linear", "evaluate_dnn", "evaluate_linear",
        "select", "push", "announce")}
    own = _own_evaluations(record)
    picked = _best_blessed(own)
    assert picked is not None, own  # no thresholds: every candidate is blessed
    summary = _candidates_file(record)
    assert summary["picked"] == picked
    assert (summary["best_by"], summary["higher_is_better"]) == ("auc", True)
    assert {r["name"]: r["value"] for r in summary["candidates"]} == {
        n: own[n]["auc"] for n in NAMES}
    blessing = json.loads((_output(record, "select", "evaluation") / "blessing.json").read_text())
    assert blessing["blessed"] is True and blessing["candidate"] == picked
    # the report opens with the comparison
    report = (_output(record, "select", "evaluation") / "report.html").read_text()
    assert report.index('<table id="candidates">') < report.index("<h1", report.index(
        "</table>"))

    # the pushed version is the picked candidate's export, recorded with its fingerprint
    (version,) = _versions(folder)
    exports = {n: _output(record, f"train_{n}", f"model_{n}") / "export" for n in NAMES}
    pushed, export = _files(version), _files(exports[picked])
    assert {name: pushed.get(name) for name in export} == export
    (other,) = set(NAMES) - {picked}
    other_export = _files(exports[other])
    assert pushed["saved_model.pb"] != other_export["saved_model.pb"]
    lineage = json.loads((version / "assets.extra" / "estflow_lineage.json").read_text())
    assert lineage["fingerprint"] == _fingerprint(record, f"train_{picked}", f"model_{picked}")
    assert record["push"]["pushed"] is True
    # the user's step gated by the blessing ran after select, reading select's evaluation
    assert record["steps"]["announce"]["metrics"] == {"candidate": picked,
                                                      "version": int(version.name)}

    assert _summary_line(own, picked) in done.stdout.splitlines()
    # the two trainings may run at once: each process got its share of the cores
    shares = core_shares(build_plan(loader.load(str(folder / "cands.py")).pipeline,
                                    source_root=str(folder)), Budget())
    assert set(shares) >= {"train_dnn", "train_linear"}
    for name, threads in shares.items():
        assert record["steps"][name]["tf_threads"] == threads
    assert "Steps that can run at once share the cores: " in done.stdout
    workspace.update(first=record, picked=picked, version=version)


def test_an_identical_rerun_reuses_the_candidates_and_pushes_nothing(workspace):
    folder, first, picked = workspace["folder"], workspace["first"], workspace["picked"]
    done = _run(folder)
    assert done.returncode == 0, _shown(done)
    record = _record(folder)
    if record["estflow_code"] != first["estflow_code"]:  # a shared checkout
        pytest.skip("estflow's step code was edited during the test: its steps ran again, as "
                    "they should")
    workspace["second"] = record
    statuses = _statuses(record)
    for step in ("ingest", "transform", "train_dnn", "train_linear", f"evaluate_{picked}"):
        assert statuses[step] == "reused", (step, statuses)
    assert statuses["push"] == "ran"
    assert _versions(folder) == [workspace["version"]]  # no new version
    assert record["push"]["already_served"] is True and record["push"]["pushed"] is False
    assert "already serves this model" in done.stdout
    assert _candidates_file(record)["picked"] == picked
    for name in NAMES:
        assert _fingerprint(record, f"train_{name}", f"model_{name}") == _fingerprint(
            first, f"train_{name}", f"model_{name}")
    assert _summary_line(_own_evaluations(record), picked) in done.stdout.splitlines()


def test_the_identical_rerun_reuses_the_losing_candidate_s_evaluation_too(workspace):
    record = workspace.get("second")
    if record is None:
        pytest.skip("the identical rerun did not run")
    after_push = ("push", "announce")  # push always runs, and so what reads its output
    assert {s: v for s, v in _statuses(record).items() if s not in after_push} == {
        s: "reused" for s in record["steps"] if s not in after_push}


def test_editing_one_candidate_reruns_that_candidate_only(workspace):
    folder, first = workspace["folder"], workspace["first"]
    pipeline = folder / "cands.py"
    text = pipeline.read_text()
    assert text.count("hidden_units=(8, 4)") == 1
    pipeline.write_text(text.replace("hidden_units=(8, 4)", "hidden_units=(12, 6)"))
    served = json.loads((_versions(folder)[-1] / "assets.extra" /
                         "estflow_lineage.json").read_text())["fingerprint"]
    done = _run(folder)
    assert done.returncode == 0, _shown(done)
    record = _record(folder)
    statuses = _statuses(record)
    assert {s: statuses[s] for s in ("train_dnn", "evaluate_dnn", "select", "push")} == {
        s: "ran" for s in ("train_dnn", "evaluate_dnn", "select", "push")}, statuses
    assert {s: statuses[s] for s in ("ingest", "transform", "train_linear",
                                     "evaluate_linear")} == {
        s: "reused" for s in ("ingest", "transform", "train_linear", "evaluate_linear")}, statuses
    assert _fingerprint(record, "train_linear", "model_linear") == _fingerprint(
        first, "train_linear", "model_linear")
    assert _fingerprint(record, "train_dnn", "model_dnn") != _fingerprint(
        first, "train_dnn", "model_dnn")
    # the DNN's step was given the edited DNN as its model, and trained it
    spec = json.loads((_run_dir(folder) / record["steps"]["train_dnn"]["parameters"]["spec"])
                      .read_text())
    assert spec["model"]["hidden_units"] == [12, 6], spec["model"]
    trained = json.loads((_output(record, "train_dnn", "model_dnn") / "train.json").read_text())
    assert (trained["model"], trained["global_step"]) == ("DNNClassifier", 30)
    own = _own_evaluations(record)
    picked = _best_blessed(own)
    assert _candidates_file(record)["picked"] == picked
    # pushed when the picked candidate is not the served model, and then as itself
    now = _fingerprint(record, f"train_{picked}", f"model_{picked}")
    versions = _versions(folder)
    assert len(versions) == (1 if now == served else 2)
    lineage = json.loads((versions[-1] / "assets.extra" / "estflow_lineage.json").read_text())
    assert lineage["fingerprint"] == now
    assert _summary_line(own, picked) in done.stdout.splitlines()
    workspace["third"] = record


def test_a_threshold_no_candidate_meets_pushes_nothing(workspace):
    folder = workspace["folder"]
    pipeline = folder / "cands.py"
    text = pipeline.read_text()
    anchor = "    push=ef.PushTarget("
    assert text.count(anchor) == 1
    pipeline.write_text(text.replace(anchor, '    eval=ef.EvalSpec(thresholds=(ef.Threshold('
                                     '"auc", lower_bound=0.9999),)),\n' + anchor))
    before = _versions(folder)
    done = _run(folder)
    assert done.returncode in (0, 3), _shown(done)
    record = _record(folder)
    own = _own_evaluations(record)
    assert all(own[n]["auc"] < 0.9999 for n in NAMES), own  # the test's premise
    assert not any(own[n]["blessed"] for n in NAMES), own
    assert done.returncode == 3, _shown(done)  # ran every step, not blessed: not pushed
    statuses = _statuses(record)
    # the threshold is the evaluations' alone: the trained candidates are reused
    assert (statuses["train_dnn"], statuses["train_linear"]) == ("reused", "reused")
    assert {s: statuses[s] for s in ("evaluate_dnn", "evaluate_linear", "select")} == {
        s: "ran" for s in ("evaluate_dnn", "evaluate_linear", "select")}
    assert _versions(folder) == before
    summary = _candidates_file(record)
    assert summary["picked"] is None
    assert [r["blessed"] for r in summary["candidates"]] == [False, False]
    blessing = json.loads((_output(record, "select", "evaluation") / "blessing.json").read_text())
    assert blessing["blessed"] is False and blessing["candidate"] is None
    for name in NAMES:
        assert any(repr(name) in reason for reason in blessing["reasons"]), name
    assert record["push"]["pushed"] is False
    assert _statuses(record)["announce"] == "skipped"
    assert "select" in record["steps"]["announce"]["reason"]
    assert "Model NOT pushed (not blessed)" in done.stdout
    assert _summary_line(own, None) in done.stdout.splitlines()
    assert any("auc" in reason for reason in record["push"]["reasons"])

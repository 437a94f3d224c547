"""A compiled pipeline's search on Katib, end to end as far as it goes without a cluster.

``estflow compile --tune-on katib`` (the default) builds the Experiment at compile time
(pipelines/kubeflow/katib.py: ``for_pipeline``, ``with_experiment``) and hands it to the tune
task as ``--katib-experiment``; ``--tune-on task`` compiles the search inside the tune task.
Here:

* both compile to IR the strict checks read (tests/pipelines/kfp_ir.py), deterministically,
  and the tune task of the first carries an Experiment Katib v0.19.0's schemas and validator
  admit (tests/pipelines/fake_kubernetes_api.py), for this run's name, namespace and inputs;
* the tune task's entry (``components.tune.__main__.main``) fills it in, creates it in
  ``FakeKatibApi`` (a fake Kubernetes API each test starts on 127.0.0.1 and stops when it
  ends), follows it, and writes ``best.json`` with estflow paths and values the final train
  applies (``contracts.tuned_train``, ``dsl.tune.apply``); what it refuses;
* the trial Katib would start from it (rendered as Katib renders it, split as ``sh -c``
  splits it) runs ``components.tune.katib_trial`` with the right arguments; its input copy
  from a bucket (a fake S3 client over a folder); and, slow, one real trial on the train
  fixture's tiny data whose stdout lines are what the Experiment's metrics filter takes.
"""

from __future__ import annotations

import ast
import base64
import dataclasses
import datetime
import io
import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

import estflow.dsl as ef
from estflow.components._runtime import entry
from estflow.components._runtime import katib as task
from estflow.components.tune import __main__ as tune_main
from estflow.components.tune import katib_trial
from estflow.dsl import tune as dsl_tune
from estflow.dsl.contracts import TUNE_BEST
from estflow.dsl.contracts import TUNED
from estflow.dsl.contracts import Files
from estflow.dsl.contracts import step_named
from estflow.dsl.contracts import tuned_train
from estflow.dsl.fingerprints import project
from estflow.pipelines.kubeflow import compiler as kfp_compiler
from estflow.pipelines.kubeflow import katib
from tests.pipelines import fake_kubernetes_api as fake
from tests.pipelines.fake_kubernetes_api import FakeKatibApi
from tests.pipelines.kfp_ir import Ir

IMAGE = "registry.example.com/team/estflow:test-1"
RUN_ROOT = "bucket/root/tuned/6c1f0a2e-run/"


def tuned_pipeline(**changes) -> ef.Pipeline:
    fields = dict(
        name="tuned",
        source=ef.CsvSource("gs://bucket/data.csv"),
        features=(ef.Numeric("x"), ef.Numeric("z"), ef.CategoricalVocab("company")),
        label=ef.Label("y"),
        model=ef.DNNClassifier(hidden_units=(8,), optimizer="Adagrad", feature_columns=(
            "x", "z", ef.Embedding("company", dimension=4))),
        train=ef.TrainSpec(max_steps=40, batch_size=32),
        resources={"train": ef.Resources(cpu_request="2", memory_request="4Gi")},
        tune=ef.Tune({"model.hidden_units": ef.Choice(((8,), (16, 8))),
                      "model.optimizer": ef.Choice(("Adagrad", "Adam")),
                      "model.learning_rate": ef.FloatRange(0.01, 0.5, log=True,
                                                           when=("model.optimizer", "Adam")),
                      "model.feature_columns[company].dimension": ef.IntRange(2, 8),
                      "train.batch_size": ef.Choice((32, 64))},
                     objective="auc", trials=6, parallel=2, trial_steps=20,
                     early_stopping=ef.MedianStop(every_steps=10, warmup_trials=1)))
    fields.update(changes)
    return ef.Pipeline(**fields)


def _pick_last(parameter: dict[str, Any]) -> str:
    space = parameter["feasibleSpace"]
    return space["list"][-1] if space.get("list") else space["max"]


def _tune_argv(ir: Ir) -> list[str]:
    """The arguments the tune task's generated code passes to the step's ``main``."""
    container = ir.container("tune")
    source = next(part for part in (*container["command"], *container.get("args", ()))
                  if "def tune(" in part)
    call = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)
                and getattr(n.func, "attr", None) == "main")
    return [ast.literal_eval(e) if isinstance(e, ast.Constant) else ast.unparse(e)
            for e in call.args[0].elts]


def _experiment_of(ir: Ir) -> dict[str, Any] | None:
    argv = _tune_argv(ir)
    flag = f"--{katib.OPTION}"
    return json.loads(argv[argv.index(flag) + 1]) if flag in argv else None


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("katib-compile")
    paths = {}
    for tune_on in ("katib", "task"):
        paths[tune_on] = folder / f"{tune_on}.yaml"
        result = kfp_compiler.compile_pipeline(tuned_pipeline(), paths[tune_on], image=IMAGE,
                                               tune_on=tune_on)
        assert result.tasks == ("ingest", "transform", "tune", "train", "evaluate")
    paths["default"] = folder / "default.yaml"
    kfp_compiler.compile_pipeline(tuned_pipeline(), paths["default"], image=IMAGE)
    return paths


# --- compiling ---------------------------------------------------------------------------------

def test_both_compile_to_strict_ir_and_only_katib_carries_an_experiment(compiled):
    irs = {k: Ir(p) for k, p in compiled.items()}
    for ir in irs.values():
        assert set(ir.tasks()) >= {"fingerprint", "ingest", "transform", "tune", "train",
                                   "evaluate", "report"}
        assert ir.artifact_source("train", TUNED) == ("tune", TUNED)
    assert _experiment_of(irs["task"]) is None
    assert _experiment_of(irs["katib"]) is not None
    assert compiled["default"].read_bytes() == compiled["katib"].read_bytes()  # katib: default
    # the search's key covers where it runs: the fingerprint task keys the tune step with it
    plans = [ir.container("fingerprint") for ir in (irs["katib"], irs["task"])]
    assert plans[0] != plans[1]


def test_compiling_is_deterministic(compiled, tmp_path):
    again = tmp_path / "again.yaml"
    kfp_compiler.compile_pipeline(tuned_pipeline(), again, image=IMAGE, tune_on="katib")
    assert again.read_bytes() == compiled["katib"].read_bytes()


def test_an_unknown_tune_on_is_refused(tmp_path):
    with pytest.raises(kfp_compiler.CompileError, match="tune_on.*'katib', 'task'"):
        kfp_compiler.compile_pipeline(tuned_pipeline(), tmp_path / "x.yaml", image=IMAGE,
                                      tune_on="cluster")


def test_the_compiled_experiment_passes_katibs_schemas_and_validator(compiled):
    experiment = _experiment_of(Ir(compiled["katib"]))
    assert "namespace" not in experiment["metadata"]  # the task's pod's, at run time
    for filled in (experiment, _filled(experiment)):
        assert fake.schema_errors(filled) == []
        assert fake.webhook_errors(filled) == []
        assert fake.suggestion_errors(filled) == []
    spec = experiment["spec"]
    assert spec["maxTrialCount"] == 6 and spec["parallelTrialCount"] == 2
    assert spec["objective"]["type"] == "maximize"
    assert spec["earlyStopping"]["algorithmName"] == "medianstop"
    (container,) = spec["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == IMAGE
    # no resources["tune"]: each trial's pod is sized as the train step's
    assert container["resources"] == {"requests": {"cpu": "2", "memory": "4Gi"}}
    argv = shlex.split(container["command"][2])
    assert argv[:9] == katib.trial_command()
    assert argv[3:9] == ["--spec", "{spec}", "--examples", "{examples}", "--transformed",
                         "{transformed}"]


_PIPELINE_FILE = """
import estflow.dsl as ef

pipeline = ef.Pipeline(
    name="tuned", source=ef.CsvSource("gs://bucket/data.csv"),
    features=(ef.Numeric("x"), ef.Numeric("z")), label=ef.Label("y"),
    model=ef.DNNClassifier(hidden_units=(8,), feature_columns=("x", "z")),
    train=ef.TrainSpec(max_steps=40),
    tune=ef.Tune({"model.hidden_units": ef.Choice(((8,), (16, 8)))}, objective="auc",
                 trials=2))
"""


@pytest.mark.parametrize("flag", [(), ("--tune-on", "katib"), ("--tune-on", "task")])
def test_the_command_line_flag(tmp_path, capsys, flag):
    from estflow.pipelines import cli

    source = tmp_path / "tuned.py"
    source.write_text(_PIPELINE_FILE)
    out = tmp_path / "tuned.yaml"
    code = cli.main(["compile", str(source), "-o", str(out), "--image", IMAGE,
                     "--source-root", "/data", *flag])
    assert code == 0, capsys.readouterr().err
    carried = _experiment_of(Ir(out))
    assert (carried is None) == (flag[-1:] == ("task",))
    if carried is not None:
        assert carried["spec"]["maxTrialCount"] == 2
        assert fake.schema_errors(carried) == [] and fake.webhook_errors(carried) == []


def test_trials_take_the_tune_steps_resources_and_image_when_declared(tmp_path):
    pipeline = tuned_pipeline(resources={
        "train": ef.Resources(cpu_request="2"),
        "tune": ef.Resources(cpu_request="3", accelerator=ef.Accelerator("nvidia-tesla-t4"))})
    path = tmp_path / "gpu.yaml"
    kfp_compiler.compile_pipeline(pipeline, path, image=IMAGE)
    experiment = _experiment_of(Ir(path))
    pod = experiment["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == IMAGE + "-gpu"
    assert container["resources"]["requests"] == {"cpu": "3"}
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "1"}


def test_a_search_katib_cannot_run_is_a_compile_error(tmp_path, monkeypatch):
    """What katib.experiment refuses (the dsl refuses most of it first) is a CompileError."""
    def refused(*args, **kwargs):
        raise ValueError("Received an invalid value for `tune.space['x']`, expected ...")

    monkeypatch.setattr(katib, "experiment", refused)
    with pytest.raises(kfp_compiler.CompileError, match="tune.space"):
        kfp_compiler.compile_pipeline(tuned_pipeline(), tmp_path / "x.yaml", image=IMAGE)
    kfp_compiler.compile_pipeline(tuned_pipeline(), tmp_path / "x.yaml", image=IMAGE,
                                  tune_on="task")


def test_successive_halving_is_refused_on_katib_and_compiles_in_the_task(tmp_path):
    """Katib's only early stopping is its median rule: a HalvingStop search compiled for
    Katib is a CompileError naming the field and the ways out; in the task it compiles."""
    pipeline = tuned_pipeline()
    pipeline = dataclasses.replace(pipeline, tune=dataclasses.replace(
        pipeline.tune, early_stopping=ef.HalvingStop(min_steps=10)))
    with pytest.raises(kfp_compiler.CompileError) as caught:
        kfp_compiler.compile_pipeline(pipeline, tmp_path / "x.yaml", image=IMAGE)
    message = str(caught.value)
    for part in ("tune.early_stopping=HalvingStop", "expected None or a MedianStop",
                 "medianstop", "--tune-on task", "HalvingStop(min_steps=10, factor=2)"):
        assert part in message
    kfp_compiler.compile_pipeline(pipeline, tmp_path / "x.yaml", image=IMAGE, tune_on="task")
    assert (tmp_path / "x.yaml").is_file()


def test_the_tokens_are_the_tasks():
    assert katib.TOKENS == task.TOKENS


# --- the tune task -----------------------------------------------------------------------------

def _token(claims: dict[str, Any]) -> str:
    def part(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")
    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2ln"


@pytest.fixture
def pod(tmp_path) -> Path:
    """The pod's service account folder: namespace ``ml``, a token of ``default-editor``."""
    folder = tmp_path / "serviceaccount"
    folder.mkdir()
    (folder / "namespace").write_text("ml\n")
    (folder / "token").write_text(_token({
        "sub": "system:serviceaccount:ml:default-editor",
        "kubernetes.io": {"namespace": "ml", "serviceaccount": {"name": "default-editor"}}}))
    return folder


def _filled(experiment: dict[str, Any]) -> dict[str, Any]:
    return task.filled(experiment, name="tuned-tune-0123456789ab", namespace="ml", values={
        "spec": tuned_pipeline().to_json(), "examples": "gs://b/examples",
        "transformed": "gs://b/transformed"})


def _task_argv(tmp_path: Path, experiment: dict[str, Any], *, spec: ef.Pipeline | None = None,
               mount: str | None = None) -> tuple[list[str], Path]:
    """The tune task's arguments as its KFP task passes them: the projected spec, its inputs
    under ``mount`` (a stand-in for KFP's /gcs/), its output there too."""
    pipeline = spec or tuned_pipeline()
    mount = mount or str(tmp_path / "gcs") + "/"
    out = Path(mount + RUN_ROOT + "tune/hyperparameters")
    projected = project(pipeline, step_named("tune").reads)
    return ["--spec", projected.to_json(), "--examples", mount + RUN_ROOT + "ingest/examples",
            "--transformed", mount + RUN_ROOT + "transform/transformed",
            "--hyperparameters", str(out),
            f"--{katib.OPTION}", json.dumps(experiment)], out


def _run_task(argv, tmp_path, pod, api, **kwargs) -> int:
    lines: list[str] = []
    code = tune_main.main(argv, mounts=((str(tmp_path / "gcs") + "/", "gs://"),),
                          katib_host=api.url, pod_folder=pod, poll_seconds=0,
                          echo=lines.append, **kwargs)
    _run_task.lines = lines
    return code


def test_the_tune_task_runs_the_experiment_and_writes_what_the_final_train_applies(
        compiled, tmp_path, pod, capsys):
    experiment = _experiment_of(Ir(compiled["katib"]))
    argv, out = _task_argv(tmp_path, experiment)
    with FakeKatibApi(pick=_pick_last, objective_value="0.9125") as api:
        code = _run_task(argv, tmp_path, pod, api)
        assert code == 0, capsys.readouterr().err
        (created,) = api.created
        (trial_name, job), = api.trial_jobs.items()
    meta = created["metadata"]
    assert meta["namespace"] == "ml"  # the pod's
    assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", meta["name"]) and len(meta["name"]) <= 40
    assert meta["name"].startswith("tuned-tune-")
    pod_spec = job["spec"]["template"]["spec"]
    assert pod_spec["serviceAccountName"] == "default-editor"  # the task's, for the bucket
    # the trial Katib starts: the trial entry, the spec the task got, the inputs' bucket URIs
    argv_trial = shlex.split(pod_spec["containers"][0]["command"][2])
    assert argv_trial[:3] == ["python", "-m", katib.TRIAL_MODULE]
    options = dict(zip(argv_trial[3::2], argv_trial[4::2], strict=True))
    assert options["--examples"] == "gs://" + RUN_ROOT + "ingest/examples"
    assert options["--transformed"] == "gs://" + RUN_ROOT + "transform/transformed"
    assert ef.Pipeline.from_json(options["--spec"]) == ef.Pipeline.from_json(argv[1])
    assignment = json.loads(options["--assignment"])
    assert assignment["model.optimizer"] == "Adam" and assignment["model.hidden_units"] == [16, 8]

    best = json.loads((out / TUNE_BEST).read_text())
    assert best == {
        "assignment": {"model.hidden_units": [16, 8], "model.optimizer": "Adam",
                       "model.learning_rate": 0.5,
                       "model.feature_columns[company].dimension": 8,
                       "train.batch_size": 64},
        "objective": "auc", "value": 0.9125, "trial": trial_name, "higher_is_better": True,
        "metrics": {"auc": 0.9125}, "experiment": f"ml/{meta['name']}"}
    metrics = json.loads((out / Files.METRICS).read_text())
    assert metrics["metrics"] == {"auc": 0.9125} and metrics["best_trial"] == trial_name
    assert (metrics["complete"], metrics["pruned"], metrics["failed"]) == (6, 0, 0)
    assert any("the trials run on Katib: Experiment ml/tuned-tune-" in line
               for line in _run_task.lines)

    # the final train: its entry parses the tune step's output, and applies best.json
    row = tuned_train(step_named("train"))
    parsed = entry.step_parser(row).parse_args([
        "--spec", argv[1], "--transformed", "/t", "--model", "/m", f"--{TUNED}", str(out)])
    spec = entry.load_pipeline(parsed.spec)
    trained = dsl_tune.apply(spec, json.loads(
        (Path(getattr(parsed, TUNED)) / TUNE_BEST).read_text())["assignment"])
    assert trained.model.hidden_units == (16, 8) and trained.model.optimizer == "Adam"
    assert trained.model.learning_rate == 0.5 and trained.train.batch_size == 64
    dims = {c.feature: c.dimension for c in trained.model.feature_columns
            if isinstance(c, ef.Embedding)}
    assert dims == {"company": 8}


def test_an_inactive_dimension_is_left_out_of_best_json(compiled, tmp_path, pod):
    experiment = _experiment_of(Ir(compiled["katib"]))
    argv, out = _task_argv(tmp_path, experiment)
    with FakeKatibApi() as api:  # the first value of each: Adagrad, the learning rate unused
        assert _run_task(argv, tmp_path, pod, api) == 0
    best = json.loads((out / TUNE_BEST).read_text())
    assert best["assignment"] == {"model.hidden_units": [8], "model.optimizer": "Adagrad",
                                  "model.feature_columns[company].dimension": 2,
                                  "train.batch_size": 32}
    assert isinstance(best["value"], float)


def test_a_retried_task_follows_the_experiment_of_its_first_attempt(compiled, tmp_path, pod):
    experiment = _experiment_of(Ir(compiled["katib"]))
    argv, out = _task_argv(tmp_path, experiment)
    with FakeKatibApi() as api:
        assert _run_task(argv, tmp_path, pod, api) == 0
        assert _run_task(argv, tmp_path, pod, api) == 0
        assert len(api.created) == 1
        assert any("created by an earlier attempt" in line for line in _run_task.lines)
        other_run, _ = _task_argv(tmp_path, experiment, mount=str(tmp_path / "gcs") + "/")
        other_run[other_run.index("--hyperparameters") + 1] = str(out).replace("6c1f", "77aa")
        assert _run_task(other_run, tmp_path, pod, api) == 0
        assert len(api.created) == 2  # another run: another Experiment
        names = [e["metadata"]["name"] for e in api.created]
        assert names[0] != names[1]


def test_inputs_on_no_bucket_are_refused(compiled, tmp_path, pod, capsys):
    experiment = _experiment_of(Ir(compiled["katib"]))
    argv, out = _task_argv(tmp_path, experiment, mount=str(tmp_path / "local") + "/")
    with FakeKatibApi() as api:
        assert _run_task(argv, tmp_path, pod, api) == 1
        assert api.calls == []
    err = capsys.readouterr().err
    assert "is no bucket path" in err and "Katib trial pods cannot see this pod's files" in err
    assert "--tune-on task" in err
    assert not (out / TUNE_BEST).exists()


def test_a_run_spec_with_another_search_is_refused(compiled, tmp_path, pod, capsys):
    experiment = _experiment_of(Ir(compiled["katib"]))
    other = tuned_pipeline(tune=ef.Tune({"train.batch_size": ef.Choice((32, 64))},
                                        objective="auc", trials=6))
    argv, _ = _task_argv(tmp_path, experiment, spec=other)
    with FakeKatibApi() as api:
        assert _run_task(argv, tmp_path, pod, api) == 1
        assert api.calls == []
    assert "another search than the Experiment compiled" in capsys.readouterr().err


def test_no_namespace_outside_a_pod_is_a_clear_error(compiled, tmp_path, capsys):
    experiment = _experiment_of(Ir(compiled["katib"]))
    argv, _ = _task_argv(tmp_path, experiment)
    with FakeKatibApi() as api:
        assert _run_task(argv, tmp_path, tmp_path / "no-pod", api) == 1
    assert "no namespace for the Experiment" in capsys.readouterr().err


def test_a_namespace_compiled_in_is_kept(tmp_path, pod):
    plan_experiment = katib.for_pipeline(tuned_pipeline(), image=IMAGE, namespace="team-a")
    argv, _ = _task_argv(tmp_path, plan_experiment)
    with FakeKatibApi(namespaces={"team-a": {fake.INJECTION_LABEL: "enabled"}}) as api:
        assert _run_task(argv, tmp_path, pod, api) == 0
        assert api.created[0]["metadata"]["namespace"] == "team-a"


def test_katib_not_installed_says_how_to_search_without_it(compiled, tmp_path, pod, capsys):
    experiment = _experiment_of(Ir(compiled["katib"]))
    argv, _ = _task_argv(tmp_path, experiment)
    with FakeKatibApi(katib_installed=False) as api:
        assert _run_task(argv, tmp_path, pod, api) == 1
    err = capsys.readouterr().err
    assert "Katib is not installed" in err and "--tune-on task" in err


def test_experiment_names_are_dns_labels_within_katibs_limit():
    for prefix in ("tuned-tune", "A Very Long Pipeline Name With Spaces-tune", "9lives", "-"):
        name = task.experiment_name("/gcs/b/root/p/run-1/tune/hyperparameters", prefix)
        assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name) and len(name) <= 40, name
    assert task.experiment_name("a") != task.experiment_name("b")
    assert task.bucket_uri("/minio/mlpipeline/v2/x") == "s3://mlpipeline/v2/x"
    assert task.bucket_uri("/s3/b/x") == "s3://b/x" and task.bucket_uri("/gcs/b/x") == "gs://b/x"
    assert task.bucket_uri("/tmp/x") is None and task.bucket_uri("/gcs/") is None


# --- the trial ---------------------------------------------------------------------------------

class _FolderS3:
    """A boto3 S3 client over a local folder (``root/<bucket>/<key>``): what the trial's copy
    calls (list, download, get)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def get_paginator(self, name):
        assert name == "list_objects_v2"
        return self

    def paginate(self, Bucket, Prefix, **_extra):  # noqa: N803 (boto3's names)
        base = self.root / Bucket
        contents = [{"Key": str(p.relative_to(base)), "Size": p.stat().st_size,
                     "LastModified": datetime.datetime.fromtimestamp(p.stat().st_mtime)}
                    for p in sorted(base.rglob("*")) if p.is_file()]
        return [{"Contents": [c for c in contents if c["Key"].startswith(Prefix)]}]

    def download_file(self, bucket, key, path):
        Path(path).write_bytes((self.root / bucket / key).read_bytes())

    def get_object(self, Bucket, Key):  # noqa: N803
        path = self.root / Bucket / Key
        if not path.is_file():
            raise _NoSuchKey()
        return {"Body": io.BytesIO(path.read_bytes())}


class _NoSuchKey(Exception):
    response = {"Error": {"Code": "NoSuchKey"}}


def test_the_trial_copies_what_it_reads_from_the_bucket(tmp_path):
    bucket = tmp_path / "store" / "b"
    for name in ("examples/eval/part-00000-of-00001.gz", "examples/ingest.json",
                 "examples/train/part-00000-of-00001.gz", "examples/statistics.pb",
                 "transformed/transform.json", "transformed/train/part-0.tfrecord.gz",
                 "transformed/transform_fn/transform_fn/saved_model.pb"):
        (bucket / name).parent.mkdir(parents=True, exist_ok=True)
        (bucket / name).write_text(name)
    clients = {"s3": _FolderS3(tmp_path / "store")}
    examples = katib_trial._local("s3://b/examples", tmp_path / "x", clients,
                                  trees=(Files.EVAL_EXAMPLES,), files=(Files.INGEST_STATS,))
    transformed = katib_trial._local("s3://b/transformed/", tmp_path / "t", clients)
    assert sorted(str(p.relative_to(examples)) for p in examples.rglob("*") if p.is_file()) \
        == ["eval/part-00000-of-00001.gz", "ingest.json"]
    assert sorted(str(p.relative_to(transformed)) for p in transformed.rglob("*")
                  if p.is_file()) == ["train/part-0.tfrecord.gz", "transform.json",
                                      "transform_fn/transform_fn/saved_model.pb"]
    assert katib_trial._local(str(bucket / "examples"), tmp_path / "y", clients) == \
        bucket / "examples"  # a local path is read where it is


def test_a_trial_with_wrong_arguments_says_why(tmp_path, capsys):
    spec = tuned_pipeline().to_json()
    base = ["--spec", spec, "--examples", str(tmp_path), "--transformed", str(tmp_path)]
    assert katib_trial.main([*base, "--assignment", '{"model.nope": 1}']) == 2
    assert "which the search does not declare" in capsys.readouterr().err
    assert katib_trial.main([*base, "--assignment", '{"train.batch_size": 1000}']) == 2
    assert "train.batch_size" in capsys.readouterr().err
    out = io.StringIO()
    assert katib_trial.main([*base, "--assignment", '{"train.batch_size": 32}'], out=out) == 1
    err = capsys.readouterr().err
    assert "[tune-trial] error: the trial needs" in err and "transform_fn" in err
    assert out.getvalue() == ""


@pytest.mark.slow
def test_one_real_trial_prints_the_lines_katibs_collector_takes(tmp_path_factory, tmp_path):
    """The train fixture's tiny data in a bucket (the fake S3 client over a folder); the trial
    as Katib renders it from the compiled Experiment; each stdout line matches the metrics
    filter, one per evaluation while training (every 20 steps to 60), the evaluate step's
    value last."""
    from tests.components import _train_fixtures as fx
    from tests.components.tune.test_tune_trials import write_raw_eval

    store = tmp_path / "store"
    transformed = fx.transformed(tmp_path_factory)
    write_raw_eval(store / "b" / "examples")
    (store / "b" / "examples" / "statistics.pb").write_bytes(b"not read")
    for path in transformed.rglob("*"):
        if path.is_file():
            target = store / "b" / "transformed" / path.relative_to(transformed)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    pipeline = fx.pipeline(model=ef.LinearClassifier(feature_columns=("x", "z", "color")),
                           tune=ef.Tune({"model.learning_rate": ef.Choice((0.3, 0.5)),
                                         "train.batch_size": ef.Choice((16, 32))},
                                        objective="auc", trials=2,
                                        early_stopping=ef.MedianStop(every_steps=20)))
    experiment = task.filled(katib.for_pipeline(pipeline, image=IMAGE), name="t-0",
                             namespace="ml", values={
                                 "spec": pipeline.to_json(), "examples": "s3://b/examples",
                                 "transformed": "s3://b/transformed"})
    job = fake.render_trial(experiment, "t-0-abc", {
        p["name"]: fake.first_feasible(p) for p in experiment["spec"]["parameters"]})
    argv = shlex.split(job["spec"]["template"]["spec"]["containers"][0]["command"][2])
    assert argv[:3] == ["python", "-m", katib.TRIAL_MODULE]
    out = io.StringIO()
    code = katib_trial.main(argv[3:], out=out, clients={"s3": _FolderS3(store)})
    assert code == 0
    lines = out.getvalue().splitlines()
    (metric_filter,) = experiment["spec"]["metricsCollectorSpec"]["source"]["filter"][
        "metricsFormat"]
    assert metric_filter == katib.metrics_filter("auc")
    found = [re.findall(metric_filter, line) for line in lines]
    assert all(len(f) == 1 and f[0][0] == "auc" for f in found), lines
    values = [float(f[0][1]) for f in found]
    assert len(values) == 4, lines  # steps 20, 40, 60, then the evaluate step's
    assert 0.5 < values[-1] <= 1.0
    assert values[-1] == pytest.approx(values[-2], abs=1e-4)  # the same checkpoint and rows


def test_the_trial_pipeline_is_the_search_in_the_tasks(tmp_path):
    """What a Katib trial trains is what a trial of the search in the task trains for the
    same values (one trial_pipeline), the inactive ones dropped."""
    from estflow.components.tune.trial import trial_pipeline

    pipeline = tuned_pipeline()
    flattened = {"model.hidden_units": [16, 8], "model.optimizer": "Adagrad",
                 "model.learning_rate": 0.2, "model.feature_columns[company].dimension": 3,
                 "train.batch_size": 64}
    kept = task.active(flattened, pipeline.tune)
    assert "model.learning_rate" not in kept
    trial = trial_pipeline(pipeline, pipeline.tune, kept)
    assert trial.model.learning_rate == pipeline.model.learning_rate
    assert trial.train.max_steps == 20 and trial.resources == {}
    assert dataclasses.replace(trial, tune=None) == trial

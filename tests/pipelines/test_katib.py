"""A hyperparameter search on Kubeflow: the Katib Experiment estflow compiles
(pipelines/kubeflow/katib.py) and the task that runs it (components/_runtime/katib.py).

The Experiment is checked against Katib v0.19.0 itself as far as it can be without a cluster:
its committed schemas and its validator's rules (tests/pipelines/fake_kubernetes_api.py), and
the trial Katib would render from it (each value substituted as raw text into the template's
JSON text, then the command run by ``sh -c``) must hand the trial the declared values.

The task runs against ``FakeKatibApi``, a fake Kubernetes API each test starts on 127.0.0.1 (an
``http.server`` in a thread) and stops when it ends (``with``), through the unmodified
``kubernetes`` client.
"""

from __future__ import annotations

import json
import re
import shlex
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from estflow.components._runtime import katib as task
from estflow.dsl import Choice
from estflow.dsl import FloatRange
from estflow.dsl import IntRange
from estflow.dsl import MedianStop
from estflow.dsl import Tune
from estflow.pipelines.kubeflow import katib
from tests.pipelines import fake_kubernetes_api as fake
from tests.pipelines.fake_kubernetes_api import FakeKatibApi

COMMAND = ["python", "-m", "estflow.components.train", "--trial", "--spec", '{"name": "taxi"}']


def declarations() -> dict[str, Any]:
    """Searches covering each kind of dimension and option."""
    return {
        "ranges-log": Tune({"model.hidden_layer_size": IntRange(8, 512, log=True),
                            "model.learning_rate": FloatRange(1e-4, 0.1, log=True),
                            "model.dropout": FloatRange(0.0, 0.5),
                            "train.batch_size": IntRange(32, 256, step=32),
                            "train.max_steps": IntRange(1, 9, step=2)},
                           objective="average_loss", trials=12, parallel=3, seed=7),
        "choices": Tune({"model.hidden_units": Choice(((64, 32), (128, 64, 32), (16,))),
                         "model.optimizer": Choice(("Adagrad", "Adam", "it's \"quoted\" \\")),
                         "model.feature_columns": Choice((("fare", "company"), ("fare",))),
                         "model.l2": Choice((None, 0.01, "auto", True)),
                         "model.dnn_feature_columns[company].dimension": Choice((4, 8))},
                        objective="auc", higher_is_better=True, trials=20, parallel=4),
        "grid": Tune({"model.hidden_units": Choice(((64, 32), (16,))),
                      "train.batch_size": IntRange(50, 250, step=100)},
                     objective="accuracy", algorithm="grid", trials=6, parallel=2,
                     max_failures=0),
        "median-stop": Tune({"model.learning_rate": FloatRange(1e-3, 1.0, log=True)},
                            objective="auc", algorithm="random", trials=30, parallel=5,
                            early_stopping=MedianStop(every_steps=200, warmup_steps=400,
                                                      warmup_trials=3), timeout_s=3600.0,
                            max_failures=40),
        "conditional": Tune({"model.optimizer": Choice(("Adagrad", "Adam")),
                             "model.learning_rate": FloatRange(1e-4, 0.1, log=True,
                                                               when=("model.optimizer", "Adam")),
                             "model.beta": Choice((0.9, 0.99), when=("model.optimizer", "Adam")),
                             "train.batch_size": Choice((128, 256))},
                            objective="label/mean", higher_is_better=False, trials=8,
                            early_stopping=MedianStop(every_steps=100, warmup_trials=0)),
    }


def compiled(tune, name: str = "taxi-tune", **kwargs) -> dict[str, Any]:
    return katib.experiment(tune, name=name, namespace="ml", image="ghcr.io/x/estflow:1.0",
                            command=COMMAND, trial_resources=kwargs.pop("trial_resources", None),
                            **kwargs)


def _custom_api(url: str) -> k8s.CustomObjectsApi:
    configuration = k8s.Configuration()
    configuration.host = url
    return k8s.CustomObjectsApi(k8s.ApiClient(configuration))


def _trial_argv(experiment: dict[str, Any], assignments: dict[str, str]) -> list[str]:
    """The command line the trial's container runs, as Katib renders and ``sh -c`` splits it."""
    job = fake.render_trial(experiment, "taxi-tune-abc12345", assignments)
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["command"][:2] == ["sh", "-c"] and len(container["command"]) == 3
    return shlex.split(container["command"][2])


def _assignment_of(argv: list[str]) -> dict[str, Any]:
    assert argv[:len(COMMAND)] == COMMAND
    assert argv[len(COMMAND)] == "--assignment" and len(argv) == len(COMMAND) + 2
    return json.loads(argv[-1])


def _jsonable(value: Any) -> Any:
    return [_jsonable(v) for v in value] if isinstance(value, tuple) else value


# --- the compiled Experiment ------------------------------------------------------------------

@pytest.mark.parametrize("case", sorted(declarations()))
def test_the_experiment_passes_katibs_schemas_and_validator(case):
    experiment = compiled(declarations()[case])
    assert fake.schema_errors(experiment) == []
    assert fake.webhook_errors(experiment) == []
    assert fake.suggestion_errors(experiment) == []
    with FakeKatibApi() as api:
        _custom_api(api.url).create_namespaced_custom_object(
            "kubeflow.org", "v1beta1", "ml", "experiments", experiment)
        assert api.created == [experiment]


def test_what_each_declaration_compiles_to():
    d = declarations()
    spec = compiled(d["ranges-log"])["spec"]
    params = {p["name"]: p for p in spec["parameters"]}
    assert params["model-hidden-layer-size"] == {
        "name": "model-hidden-layer-size", "parameterType": "int",
        "feasibleSpace": {"min": "8", "max": "512", "distribution": "logUniform"}}
    assert params["model-learning-rate"]["feasibleSpace"] == {
        "min": "0.0001", "max": "0.1", "distribution": "logUniform"}
    assert params["model-dropout"] == {"name": "model-dropout", "parameterType": "double",
                                       "feasibleSpace": {"min": "0.0", "max": "0.5"}}
    assert params["train-batch-size"]["feasibleSpace"] == {"min": "32", "max": "256",
                                                           "step": "32"}
    # low not a multiple of step: Hyperopt's quniform would draw even numbers, so a list
    assert params["train-max-steps"] == {"name": "train-max-steps",
                                         "parameterType": "categorical",
                                         "feasibleSpace": {"list": ["1", "3", "5", "7", "9"]}}
    assert spec["objective"] == {"type": "minimize", "objectiveMetricName": "average_loss",
                                 "metricStrategies": [{"name": "average_loss",
                                                       "value": "latest"}]}
    assert spec["algorithm"] == {"algorithmName": "tpe", "algorithmSettings": [
        {"name": "random_state", "value": "7"}]}
    assert (spec["maxTrialCount"], spec["parallelTrialCount"], spec["maxFailedTrialCount"]) \
        == (12, 3, 4)
    assert "earlyStopping" not in spec

    choices = {p["name"]: p["feasibleSpace"]["list"]
               for p in compiled(d["choices"])["spec"]["parameters"]}
    assert choices["model-hidden-units"] == ["[64, 32]", "[128, 64, 32]", "[16]"]
    assert choices["model-optimizer"][:2] == ["Adagrad", "Adam"]
    assert choices["model-dnn-feature-columns-company-dimension"] == ["4", "8"]
    assert choices["model-l2"][:3] == ["null", "0.01", '\\"auto\\"']

    grid = compiled(d["grid"])["spec"]
    assert grid["algorithm"]["algorithmName"] == "grid"
    assert grid["maxFailedTrialCount"] == 1  # max_failures=0: the first failure ends it
    assert {p["name"]: p["feasibleSpace"] for p in grid["parameters"]}["train-batch-size"] \
        == {"min": "50", "max": "250", "step": "100"}  # a grid enumerates any range

    stop = compiled(d["median-stop"])
    assert stop["spec"]["earlyStopping"] == {"algorithmName": "medianstop", "algorithmSettings": [
        {"name": "min_trials_required", "value": "3"}, {"name": "start_step", "value": "3"}]}
    assert stop["spec"]["algorithm"]["algorithmName"] == "random"
    assert stop["spec"]["maxFailedTrialCount"] == 30  # at most maxTrialCount
    assert stop["metadata"]["annotations"][katib.TIMEOUT_ANNOTATION] == "3600.0"
    conditional = compiled(d["conditional"])
    assert conditional["spec"]["earlyStopping"]["algorithmSettings"] == [
        {"name": "min_trials_required", "value": "1"}, {"name": "start_step", "value": "1"}]
    assert conditional["spec"]["objective"]["type"] == "minimize"


def test_the_trial_receives_every_declared_value():
    """For each parameter, each feasible value Katib may assign (a list's entries, a range's
    ends) reaches the trial's ``--assignment`` as the declared value, through Katib's raw
    substitution into the template's JSON text and the shell."""
    for case, tune in declarations().items():
        experiment = compiled(tune)
        mapping = katib.parameter_mapping(experiment)
        dims = dict(tune.space)
        params = experiment["spec"]["parameters"]
        for param in params:
            space = param["feasibleSpace"]
            entry = mapping[param["name"]]
            dim = dims[entry["path"]]
            if "list" in space:
                expected = (list(dim.values) if hasattr(dim, "values")
                            else list(range(dim.low, dim.high + 1, dim.step)))
                offered = space["list"]
            else:
                kind = int if param["parameterType"] == "int" else float
                expected, offered = [kind(dim.low), kind(dim.high)], [space["min"], space["max"]]
            assert len(offered) == len(expected), (case, param)
            for token, value in zip(offered, expected, strict=True):
                assignments = {p["name"]: fake.first_feasible(p) for p in params}
                assignments[param["name"]] = token
                got = _assignment_of(_trial_argv(experiment, assignments))
                assert list(got) == [mapping[p["name"]]["path"] for p in params]
                assert got[entry["path"]] == _jsonable(value), (case, entry["path"], token)
                assert type(got[entry["path"]]) is type(_jsonable(value))
                read = dict(experiment, status={"currentOptimalTrial": {
                    "bestTrialName": "t", "parameterAssignments": [
                        {"name": k, "value": v} for k, v in assignments.items()],
                    "observation": {"metrics": [{"name": tune.objective, "latest": "0.5"}]}}})
                back = task.best_of(read)["assignment"]
                if entry["path"] in back:
                    assert back[entry["path"]] == value


def test_a_pipelines_search_round_trips_through_katib(tmp_path):
    """A declared pipeline's search (objective resolved by the pipeline's checks): what the
    trial receives, once its inactive dimensions are left out, and the best assignment the task
    writes are both assignments ``Tune.apply`` takes."""
    import estflow.dsl as ef

    pipeline = ef.Pipeline(
        name="taxi", source=ef.CsvSource("trips.csv"),
        features=(ef.Numeric("fare"), ef.CategoricalVocab("company")), label=ef.Label("tipped"),
        model=ef.DNNClassifier(hidden_units=(16,), optimizer="Adagrad", feature_columns=(
            "fare", ef.Embedding("company", dimension=4))),
        train=ef.TrainSpec(max_steps=1000),
        tune=ef.Tune({"model.hidden_units": ef.Choice(((16,), (64, 32))),
                      "model.optimizer": ef.Choice(("Adagrad", "Adam")),
                      "model.learning_rate": ef.FloatRange(1e-4, 0.1, log=True,
                                                           when=("model.optimizer", "Adam")),
                      "model.feature_columns[company].dimension": ef.IntRange(2, 16),
                      "train.batch_size": ef.Choice((128, 256))}, objective="auc"))
    experiment = compiled(pipeline.tune)
    assert experiment["spec"]["objective"]["type"] == "maximize"
    for pick in (fake.first_feasible, _pick_last):
        assignments = {p["name"]: pick(p) for p in experiment["spec"]["parameters"]}
        received = _assignment_of(_trial_argv(experiment, assignments))
        trial = pipeline.tune.apply(pipeline, task.active(received, pipeline.tune))
        with FakeKatibApi(pick=pick) as api:
            best = task.run_search(_custom_api(api.url), experiment, tmp_path / pick.__name__,
                                   poll_seconds=0, echo=lambda line: None)
        assert pipeline.tune.apply(pipeline, best["assignment"]) == trial
    assert trial.model.hidden_units == (64, 32) and trial.model.optimizer == "Adam"
    assert trial.model.learning_rate == 0.1 and trial.train.batch_size == 256


def test_the_trial_knows_its_name_and_prints_unbuffered():
    experiment = compiled(declarations()["grid"])
    job = fake.render_trial(experiment, "taxi-tune-x1", {
        p["name"]: fake.first_feasible(p) for p in experiment["spec"]["parameters"]})
    pod = job["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["ESTFLOW_TRIAL_NAME"] == "taxi-tune-x1" and env["PYTHONUNBUFFERED"] == "1"
    assert container["name"] == experiment["spec"]["trialTemplate"]["primaryContainerName"]
    assert pod["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}
    assert job["spec"]["backoffLimit"] == 0 and pod["spec"]["restartPolicy"] == "Never"


@pytest.mark.parametrize("objective", ["auc", "average_loss", "label/mean", "auc_pr"])
def test_the_metrics_filter_takes_the_trials_lines_only(objective):
    """Katib's collector keeps, of the lines holding the metric's name, the filter's matches
    (name, value); only ``<objective>=<value>`` lines match, not tf.estimator's own logs."""
    experiment = compiled(Tune({"model.x": IntRange(1, 3)}, objective=objective))
    (filt,) = experiment["spec"]["metricsCollectorSpec"]["source"]["filter"]["metricsFormat"]
    assert experiment["spec"]["metricsCollectorSpec"]["collector"] == {"kind": "StdOut"}
    for value in (0.8731, 1e-05, -2.5e10, 3.0, 12):
        line = f"{objective}={value!r}"
        assert re.findall(filt, line)[0][:2] == (objective, repr(value)), line
    for noise in (f"INFO:tensorflow:Saving dict for global step 100: {objective} = 0.5",
                  f"{objective} = 0.5", f"x{objective}=0.5", f"{objective}=nan",
                  f"eval {objective}=0.5", f"{objective}="):
        assert not re.findall(filt, noise), noise


def test_trial_resources_compile_into_the_job():
    from estflow.dsl import Accelerator
    from estflow.dsl import PvcMount
    from estflow.dsl import Resources
    from estflow.dsl import SecretEnv

    resources = Resources(cpu_request="2", memory_request="8Gi", memory_limit="16Gi",
                          accelerator=Accelerator("nvidia-l4"), node_pool="gpu",
                          pvcs=(PvcMount("data", mount_path="/mnt/data"),),
                          secrets_as_env=(SecretEnv("s3", {"key": "AWS_KEY"}),),
                          ephemeral_storage="50Gi", timeout_seconds=3600)
    experiment = compiled(declarations()["grid"], trial_resources=resources,
                          service_account="pipeline-runner")
    assert fake.schema_errors(experiment) == [] and fake.webhook_errors(experiment) == []
    job = experiment["spec"]["trialTemplate"]["trialSpec"]
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["resources"] == {"requests": {"cpu": "2", "memory": "8Gi"},
                                      "limits": {"memory": "16Gi", "nvidia.com/gpu": "1"}}
    assert pod["serviceAccountName"] == "pipeline-runner"
    assert pod["nodeSelector"]["cloud.google.com/gke-nodepool"] == "gpu"
    assert pod["tolerations"] and pod["volumes"][0]["persistentVolumeClaim"] == {
        "claimName": "data"}
    assert container["volumeMounts"] == [{"name": "pvc-0", "mountPath": "/mnt/data"},
                                         {"name": "estflow-scratch", "mountPath": "/tmp"}]
    assert pod["volumes"][1] == {"name": "estflow-scratch", "emptyDir": {"sizeLimit": "50Gi"}}
    assert {"name": "AWS_KEY", "valueFrom": {"secretKeyRef": {
        "name": "s3", "key": "key", "optional": False}}} in container["env"]
    assert job["spec"]["activeDeadlineSeconds"] == 3600
    plain = compiled(declarations()["grid"], trial_resources={"limits": {"cpu": "1"}})
    assert plain["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"][
        "containers"][0]["resources"] == {"limits": {"cpu": "1"}}


def test_katib_names_are_dns_labels_and_distinct():
    taken: list[str] = []
    for path in ("model.dnn_feature_columns[company].dimension", "model.params.Learning Rate",
                 "model.params.learning-rate", "model.params.9lives", "model." + "x" * 80):
        name = katib.katib_name(path, taken)
        assert re.fullmatch(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", name), name
        assert name not in taken
        taken.append(name)
    assert taken[:3] == ["model-dnn-feature-columns-company-dimension",
                         "model-params-learning-rate", "model-params-learning-rate-2"]


@pytest.mark.parametrize("change, message", [
    ({"name": "a" * 41}, "at most 40"),
    ({"name": "Taxi"}, "Katib experiment name"),
    ({"namespace": "Team A"}, "namespace"),
    ({"command": "python -m x"}, "list of strings"),
    ({"command": []}, "list of strings"),
    ({"image": ""}, "image"),
])
def test_arguments_katib_would_refuse_are_refused(change, message):
    kwargs = {"name": "taxi-tune", "namespace": "ml", "image": "estflow:1", "command": COMMAND,
              "trial_resources": None, **change}
    with pytest.raises(ValueError, match=message):
        katib.experiment(declarations()["grid"], **kwargs)


def test_a_float_range_in_a_grid_is_refused():
    """dsl/tune.py refuses it too; the compiler does not rely on that (Katib's grid fails the
    Experiment later for a double without a step)."""
    tune = SimpleNamespace(space=(("model.lr", FloatRange(0.1, 0.2)),), objective="auc",
                           higher_is_better=True, trials=2, parallel=1, algorithm="grid",
                           early_stopping=None, max_failures=1, timeout_s=None, seed=0)
    with pytest.raises(ValueError, match="grid"):
        katib.experiment(tune, name="t", namespace="ml", image="i", command=["x"],
                         trial_resources=None)


# --- what the fake refuses --------------------------------------------------------------------

def _broken(change) -> dict[str, Any]:
    experiment = compiled(declarations()["median-stop"])
    change(experiment)
    return experiment


@pytest.mark.parametrize("change, reason", [
    (lambda e: e["spec"].update(maxTrialCount="30"), "is not of type 'integer'"),
    (lambda e: e["spec"].update(maxTrialCounts=30), "Additional properties"),
    (lambda e: e["spec"]["parameters"][0]["feasibleSpace"].update(distribution="log"),
     "distribution: log is not supported"),
    (lambda e: e["spec"].update(parallelTrialCount=31), "parallelTrialCount"),
    (lambda e: e["spec"]["trialTemplate"]["trialParameters"].pop(0), "not found in "
     "spec.trialParameters"),
    (lambda e: e["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"][
        "containers"][0].update(commands=["x"]), "unable to convert"),
    (lambda e: e["spec"]["algorithm"].update(algorithmName="bayes"), "Suggestion config"),
    (lambda e: e["spec"]["metricsCollectorSpec"]["source"]["filter"].update(
        metricsFormat=["auc=(.*)"]), "two top subexpressions"),
])
def test_an_invalid_experiment_is_refused_with_the_reason(change, reason):
    experiment = _broken(change)
    with FakeKatibApi() as api:
        with pytest.raises(ApiException) as raised:
            _custom_api(api.url).create_namespaced_custom_object(
                "kubeflow.org", "v1beta1", "ml", "experiments", experiment)
        assert raised.value.status == 400
        assert reason in json.loads(raised.value.body)["message"]
        assert api.created == []
        with pytest.raises(task.KatibError, match="Katib refused the Experiment"):
            task.run_search(_custom_api(api.url), experiment, "unused", poll_seconds=0,
                            echo=lambda line: None)


def test_settings_the_suggestion_service_refuses_fail_the_experiment(tmp_path):
    experiment = compiled(declarations()["grid"])
    experiment["spec"]["maxTrialCount"] = 7  # the grid has 6 points
    with FakeKatibApi() as api:
        with pytest.raises(task.SearchFailed, match="all possible search combinations: 6"):
            task.run_search(_custom_api(api.url), experiment, tmp_path, poll_seconds=0,
                            echo=lambda line: None)


# --- the task ---------------------------------------------------------------------------------

def _pick_last(parameter: dict[str, Any]) -> str:
    space = parameter["feasibleSpace"]
    return space["list"][-1] if space.get("list") else space["max"]


def test_the_task_writes_the_best_assignment_as_estflow_paths(tmp_path, capsys):
    tune = declarations()["choices"]
    source = tmp_path / "experiment.json"
    source.write_text(json.dumps(compiled(tune)))
    with FakeKatibApi(pick=_pick_last, objective_value="0.91") as api:
        code = task.main(["--experiment", str(source), "--output", str(tmp_path / "out"),
                          "--name", "taxi-run-1", "--poll-seconds", "0", "--host", api.url])
        assert code == 0, capsys.readouterr().err
        (created,) = api.created
        assert created["metadata"]["name"] == "taxi-run-1"
        assert task.SPEC_ANNOTATION in created["metadata"]["annotations"]
        best_trial = next(iter(api.trial_jobs))
    best = json.loads((tmp_path / "out" / "best.json").read_text())
    expected = {"model.hidden_units": (16,), "model.optimizer": 'it\'s "quoted" \\',
                "model.feature_columns": ("fare",), "model.l2": True,
                "model.dnn_feature_columns[company].dimension": 8}
    assert best == {"assignment": {k: _jsonable(v) for k, v in expected.items()},
                    "objective": "auc", "value": 0.91, "trial": best_trial}
    out = capsys.readouterr().out
    assert "[tune] created Experiment ml/taxi-run-1 (20 trials, 4 at once, tpe)" in out
    assert "[tune] Running: trials of 20: 1 running" in out
    assert "[tune] Succeeded: trials of 20: 20 succeeded; best " in out


def test_the_task_returns_tuples_and_leaves_inactive_dimensions_out(tmp_path):
    tune = declarations()["conditional"]
    experiment = compiled(tune)

    def adagrad(parameter):  # the first optimizer: the learning rate and beta are inactive
        return fake.first_feasible(parameter)

    def adam(parameter):
        return _pick_last(parameter)

    with FakeKatibApi(pick=adagrad) as api:
        best = task.run_search(_custom_api(api.url), experiment, tmp_path / "a", poll_seconds=0,
                               echo=lambda line: None)
    assert best["assignment"] == {"model.optimizer": "Adagrad", "train.batch_size": 128}
    assert best["objective"] == "label/mean"
    with FakeKatibApi(pick=adam) as api:
        best = task.run_search(_custom_api(api.url), experiment, tmp_path / "b", poll_seconds=0,
                               echo=lambda line: None)
    assert best["assignment"] == {"model.optimizer": "Adam", "model.learning_rate": 0.1,
                                  "model.beta": 0.99, "train.batch_size": 256}
    # the trial's own rule: what it applies of the flattened assignment
    flattened = {"model.optimizer": "Adagrad", "model.learning_rate": 0.01, "model.beta": 0.9,
                 "train.batch_size": 128}
    assert task.active(flattened, tune) == {"model.optimizer": "Adagrad",
                                           "train.batch_size": 128}
    tuples = task.active({"model.hidden_units": [64, 32]}, declarations()["choices"])
    assert tuples == {"model.hidden_units": (64, 32)}


@pytest.mark.parametrize("body", ["status", "text"])
def test_katib_not_installed_is_a_clear_error(tmp_path, capsys, body):
    source = tmp_path / "experiment.json"
    source.write_text(json.dumps(compiled(declarations()["grid"])))
    with FakeKatibApi(katib_installed=False, not_found_body=body) as api:
        code = task.main(["--experiment", str(source), "--output", str(tmp_path / "out"),
                          "--host", api.url])
    assert code == 1
    err = capsys.readouterr().err
    assert "Katib is not installed in this cluster" in err
    assert "experiments.kubeflow.org/v1beta1" in err
    assert "KFP-only fan-out of trials" in err and "ParallelFor" in err
    assert not (tmp_path / "out").exists()


def test_a_missing_namespace_is_not_mistaken_for_a_missing_katib(tmp_path):
    experiment = compiled(declarations()["grid"])
    experiment["metadata"]["namespace"] = "nowhere"
    with FakeKatibApi() as api:
        with pytest.raises(task.KatibError, match="namespace 'nowhere' does not exist"):
            task.run_search(_custom_api(api.url), experiment, tmp_path, poll_seconds=0,
                            echo=lambda line: None)


def test_a_namespace_without_katibs_label_says_how_to_label_it(tmp_path):
    with FakeKatibApi(namespaces={"ml": {}}) as api:
        with pytest.raises(task.KatibError, match="kubectl label namespace ml katib.kubeflow"
                           ".org/metrics-collector-injection=enabled"):
            task.run_search(_custom_api(api.url), compiled(declarations()["grid"]), tmp_path,
                            poll_seconds=0, echo=lambda line: None)


def test_a_failed_experiment_is_an_error_and_is_kept(tmp_path):
    with FakeKatibApi(outcome="failed") as api:
        with pytest.raises(task.SearchFailed, match="max failed count has reached"):
            task.run_search(_custom_api(api.url), compiled(declarations()["grid"]), tmp_path,
                            poll_seconds=0, echo=lambda line: None)
        assert list(api.experiments) == [("ml", "taxi-tune")]
    assert not (tmp_path / "best.json").exists()


def test_no_trial_reporting_the_objective_is_an_error(tmp_path):
    with FakeKatibApi(outcome="no-metrics") as api:
        with pytest.raises(task.SearchFailed, match="reported 'accuracy'.*'<objective>=<value>'"):
            task.run_search(_custom_api(api.url), compiled(declarations()["grid"]), tmp_path,
                            poll_seconds=0, echo=lambda line: None)


def test_a_retried_task_follows_its_own_experiment_and_refuses_another(tmp_path):
    experiment = compiled(declarations()["grid"])
    lines: list[str] = []
    with FakeKatibApi() as api:
        first = task.run_search(_custom_api(api.url), experiment, tmp_path / "1",
                                poll_seconds=0, echo=lines.append)
        again = task.run_search(_custom_api(api.url), experiment, tmp_path / "2",
                                poll_seconds=0, echo=lines.append)
        assert first == again and len(api.created) == 1
        assert any("created by an earlier attempt" in line for line in lines)
        other = compiled(declarations()["choices"])
        with pytest.raises(task.KatibError, match="exists already, with another spec"):
            task.run_search(_custom_api(api.url), other, tmp_path / "3", poll_seconds=0,
                            echo=lines.append)


def test_the_timeout_waits_for_the_running_trials_then_deletes_the_experiment(tmp_path):
    """Tune.timeout_s: no trial counts that starts after it; the ones running then finish."""
    experiment = compiled(declarations()["median-stop"])  # timeout_s=3600 in the annotation
    now = [0.0]
    lines: list[str] = []

    def sleep(seconds):
        now[0] += 1000.0

    with FakeKatibApi(outcome="endless") as api:
        best = task.run_search(_custom_api(api.url), experiment, tmp_path, poll_seconds=1,
                               echo=lines.append, sleep=sleep, clock=lambda: now[0])
        assert api.experiments == {}
        gets = [c for c in api.calls if c[2] == "get"]
    assert any("timeout_s (3600 s) passed" in line for line in lines)
    assert "deleted Experiment ml/taxi-tune" in lines[-2]
    # GET 4 at 3000 s: running 4, 5; the timeout at GET 5 (4000 s): waits for 5 and 6
    assert len(gets) == 7
    assert best["trial"] == "taxi-tune-trial-1"
    assert json.loads((tmp_path / "best.json").read_text()) == best


def test_a_stopped_task_deletes_its_experiment(tmp_path):
    def interrupted(seconds):
        raise KeyboardInterrupt

    with FakeKatibApi(outcome="endless") as api:
        with pytest.raises(KeyboardInterrupt):
            task.run_search(_custom_api(api.url), compiled(declarations()["grid"]), tmp_path,
                            poll_seconds=1, echo=lambda line: None, sleep=interrupted)
        assert api.experiments == {}
        assert ("kubeflow.org", "experiments", "delete") in api.calls


def test_an_experiment_not_compiled_by_estflow_is_refused_before_the_cluster(tmp_path):
    experiment = compiled(declarations()["grid"])
    del experiment["metadata"]["annotations"][katib.MAPPING_ANNOTATION]
    with FakeKatibApi() as api:
        with pytest.raises(task.KatibError, match="compile it with estflow"):
            task.run_search(_custom_api(api.url), experiment, tmp_path, echo=lambda line: None)
        assert api.calls == []


def test_the_task_and_the_compiler_agree_on_their_annotations():
    assert task.MAPPING_ANNOTATION == katib.MAPPING_ANNOTATION
    assert task.TIMEOUT_ANNOTATION == katib.TIMEOUT_ANNOTATION
    assert (task.GROUP, task.VERSION) == tuple(katib.API_VERSION.split("/"))

"""The push step rolls each pushed version out on KServe (``PushTarget.kserve_rollout``).

The cluster is a fake Kubernetes API on 127.0.0.1 over HTTPS (tests/components/
fake_kserve_api.py), started and stopped by each test: it validates every applied
InferenceService against KServe's real CRD schema (v0.16.0 and v0.20.0) and plays KServe's
controller (revisions Ready, failed or stuck). The push runs as in a KFP task: ``python -m
estflow.components.push``'s ``main`` with its command line, credentials from a kubeconfig (as
outside a cluster) or from a service account folder (token, ca.crt, namespace) as in a pod.

What this guards: the push used to only write the manifest (nothing applied it, so a new
version was served only after a manual re-apply), with ``storageUri`` the whole model folder
(every version, eval outputs and warm-start checkpoints downloaded by each predictor pod).
"""

import json
from pathlib import Path

import pytest

import estflow.dsl as ef
from estflow.components import push
from estflow.components.push import rollout
from tests.components.fake_kserve_api import FakeKServe


@pytest.fixture(autouse=True)
def _fast_polls(monkeypatch):
    monkeypatch.setattr(rollout, "POLL_SECONDS", 0.01)  # the fake moves one stage per GET


def _pipeline(**kserve):
    return ef.Pipeline(
        name="chicago-taxi", source=ef.CsvSource("unused.csv"),
        features=(ef.Numeric("fare", default=0.0),), label=ef.Label("big_tipper"),
        model=ef.LinearClassifier(feature_columns=("fare",)), train=ef.TrainSpec(max_steps=1),
        push=ef.PushTarget("serving_models", "chicago_taxi", kserve_manifest=True, **kserve))


def _trained(run: str, payload: bytes) -> None:
    """What train and evaluate leave in a run folder: an export (with the warm-start
    checkpoint and raw feature types under assets.extra) and a blessing."""
    export = Path(run, "model", "export")
    (export / "variables").mkdir(parents=True)
    (export / "saved_model.pb").write_bytes(payload)
    (export / "variables" / "variables.index").write_bytes(b"index")
    (export / "assets.extra" / "estflow_checkpoint").mkdir(parents=True)
    (export / "assets.extra" / "estflow_checkpoint" / "model.ckpt-1.data").write_bytes(b"c" * 99)
    (export / "assets.extra" / "estflow_raw_features.json").write_text("{}")
    evaluation = Path(run, "evaluation")
    evaluation.mkdir()
    (evaluation / "blessing.json").write_text(json.dumps({"blessed": True, "checks": []}))
    (evaluation / "metrics.json").write_text(json.dumps({"metrics": {"auc": 0.9}}))


def _push(run: str, pipeline: ef.Pipeline, capsys) -> tuple[int, dict, str]:
    """One push task, as KFP runs it; returns (exit status, push.json, stderr)."""
    Path("spec.json").write_text(pipeline.to_json())
    code = push.main(["--spec", "spec.json", "--model", f"{run}/model", "--evaluation",
                      f"{run}/evaluation", "--pushed", f"{run}/pushed",
                      "--model-fingerprint", run])
    result = json.loads(Path(run, "pushed", "push.json").read_text())
    return code, result, capsys.readouterr().err


def _kubeconfig(api: FakeKServe, namespace: str = "ml") -> str:
    Path("kubeconfig").write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": api.host,
                                                  "certificate-authority": str(api.ca)}}],
        "users": [{"name": "sa", "user": {"token": api.token}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "sa",
                                                  "namespace": namespace}}]}))
    return str(Path("kubeconfig").resolve())


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """A fresh directory as cwd, no in-cluster service account, the fake's kubeconfig."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(rollout, "SERVICE_ACCOUNT_DIR", str(tmp_path / "no-service-account"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)

    def start(tag="v0.20.0", **options):
        (tmp_path / "fake").mkdir(exist_ok=True)
        api = FakeKServe(tmp_path / "fake", tag, **options)
        monkeypatch.setenv("KUBECONFIG", _kubeconfig(api))
        return api
    return start


@pytest.mark.parametrize("tag", ["v0.16.0", "v0.20.0"])
def test_each_push_is_served_first_created_then_patched(cluster, capsys, tag):
    with cluster(tag) as api:
        _trained("run1", b"model one")
        code, first, _ = _push("run1", _pipeline(kserve_rollout=True), capsys)
        assert code == 0 and first["pushed"] is True
        uri1 = first["kserve_storage_uri"]
        assert api.served("ml", "chicago-taxi") == {uri1: 100}
        _trained("run2", b"model two")
        code, second, _ = _push("run2", _pipeline(kserve_rollout=True), capsys)
        assert code == 0 and second["version"] > first["version"]
        uri2 = second["kserve_storage_uri"]
        assert api.served("ml", "chicago-taxi") == {uri2: 100}  # the new version serves
    assert [a["query"]["fieldManager"] for a in api.applies] == ["estflow", "estflow"]
    assert {a["query"].get("fieldValidation") for a in api.applies} == {"Strict"}
    assert api.services[("ml", "chicago-taxi")]["generation"] == 2
    assert second["kserve_rollout"]["revision"] == "chicago-taxi-predictor-00002"
    # storageUri holds the pushed version alone, without estflow's files under assets.extra
    model_base = Path("serving_models", "chicago_taxi").resolve()
    assert uri2 == f"{model_base}/kserve/{second['version']}-only"
    served = sorted(p.relative_to(uri2).as_posix() for p in Path(uri2).rglob("*")
                    if p.is_file())
    assert served == [f"{second['version']}/saved_model.pb",
                      f"{second['version']}/variables/variables.index"]
    assert Path(uri2, str(second["version"]), "saved_model.pb").read_bytes() == b"model two"
    # the model base still holds every version with its checkpoint (warm start, baseline)
    assert (model_base / str(first["version"]) / "assets.extra" / "estflow_checkpoint").is_dir()
    model = api.applies[-1]["body"]["spec"]["predictor"]["model"]
    assert model["args"] == ["--model_name=chicago_taxi"]


def test_a_canary_gets_its_share_and_the_previous_version_the_rest(cluster, capsys):
    pipeline = _pipeline(kserve_rollout=True, kserve_canary_percent=20)
    with cluster() as api:
        _trained("run1", b"one")
        _, first, _ = _push("run1", pipeline, capsys)
        _trained("run2", b"two")
        code, second, _ = _push("run2", pipeline, capsys)
        assert code == 0
        assert api.served("ml", "chicago-taxi") == {second["kserve_storage_uri"]: 20,
                                                    first["kserve_storage_uri"]: 80}
    assert api.applies[-1]["body"]["spec"]["predictor"]["canaryTrafficPercent"] == 20
    assert sorted(t["percent"] for t in second["kserve_rollout"]["traffic"]) == [20, 80]


def test_a_failed_rollout_fails_the_push_and_the_previous_version_keeps_serving(cluster,
                                                                               capsys):
    with cluster() as api:
        _trained("run1", b"one")
        _, first, _ = _push("run1", _pipeline(kserve_rollout=True), capsys)
        _trained("run2", b"two")
        bad = str(Path("serving_models/chicago_taxi/kserve").resolve())
        api.outcomes.update({f"{bad}/{v}-only": ("failed", "RevisionFailed", "Revision "
                                                 "failed with message: Op type not registered")
                             for v in range(first["version"] + 1, first["version"] + 5)})
        code, second, err = _push("run2", _pipeline(kserve_rollout=True), capsys)
        assert code == 1
        assert "RevisionFailed" in err and "Op type not registered" in err
        assert "keeps serving the previous revision" in err
        assert api.served("ml", "chicago-taxi") == {first["kserve_storage_uri"]: 100}
    assert second["pushed"] is True and "RevisionFailed" in second["kserve_rollout"]["failed"]


def test_a_revision_never_ready_times_out_and_a_retried_push_rolls_it_out(cluster, capsys):
    pipeline = _pipeline(kserve_rollout=True, kserve_rollout_timeout=1)
    state = {"ready": False}
    with cluster() as api:
        api.outcomes = _Outcomes(lambda uri: "ready" if state["ready"] else "stuck")
        _trained("run1", b"one")
        code, first, err = _push("run1", pipeline, capsys)
        assert code == 1 and "not Ready after 1 s" in err
        state["ready"] = True  # e.g. a node with room came up
        code, again, _ = _push("run1", pipeline, capsys)  # the task retried: same model
        assert code == 0 and again["already_served"] is True
        uri = first["kserve_storage_uri"]
        assert again["kserve_storage_uri"] == uri
        assert api.served("ml", "chicago-taxi") == {uri: 100}
    assert api.services[("ml", "chicago-taxi")]["generation"] == 1  # applied twice, one spec


class _Outcomes(dict):
    """Outcomes decided when the fake asks (by storageUri)."""

    def __init__(self, decide):
        super().__init__()
        self.decide = decide

    def get(self, key, default=None):
        return self.decide(key)


def test_no_credentials_is_a_clear_error_before_anything_is_published(cluster, capsys,
                                                                       monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(Path("missing-kubeconfig").resolve()))
    _trained("run1", b"one")
    with pytest.raises(rollout.RolloutError, match="needs Kubernetes credentials.*service "
                       "account.*no-service-account.*kubeconfig"):
        push.run(_pipeline(kserve_rollout=True), "run1/model", "run1/evaluation",
                 "run1/pushed")
    assert not Path("serving_models").exists()
    # without kserve_rollout the push writes the manifest only, and needs no cluster
    result = push.run(_pipeline(), "run1/model", "run1/evaluation", "run1/pushed")
    assert result["pushed"] is True and "kserve_rollout" not in result
    assert Path(result["kserve_manifest"]).read_text().count("kubectl apply -f") == 1


def test_a_service_account_without_the_rbac_rule_is_told_which_one(cluster, capsys):
    with cluster(forbid=True):
        _trained("run1", b"one")
        code, result, err = _push("run1", _pipeline(kserve_rollout=True), capsys)
    assert code == 1 and "HTTP 403" in err
    assert "needs get, create and patch on inferenceservices.serving.kserve.io" in err


def test_in_a_pod_the_service_account_and_its_namespace_are_used(tmp_path, monkeypatch,
                                                                  capsys):
    """The pod's path: token, ca.crt and namespace files, KUBERNETES_SERVICE_HOST/PORT."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (tmp_path / "fake").mkdir()
    with FakeKServe(tmp_path / "fake", token="pod-token") as api:
        (account / "token").write_text("pod-token")
        (account / "ca.crt").write_bytes(api.ca.read_bytes())
        (account / "namespace").write_text("team-a\n")
        monkeypatch.setattr(rollout, "SERVICE_ACCOUNT_DIR", str(account))
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(api.port))
        _trained("run1", b"one")
        code, result, err = _push("run1", _pipeline(kserve_rollout=True), capsys)
        assert code == 0, err
        assert api.served("team-a", "chicago-taxi") == {result["kserve_storage_uri"]: 100}
    assert result["kserve_rollout"]["namespace"] == "team-a"


def test_the_fake_refuses_what_kserve_would_refuse(tmp_path):
    """The fake's schema check is a real one: a misspelt field is a 422 from the API."""
    with FakeKServe(tmp_path) as api:
        from kubernetes import client as k8s
        configuration = k8s.Configuration()
        configuration.host, configuration.ssl_ca_cert = api.host, str(api.ca)
        configuration.api_key = {"authorization": f"Bearer {api.token}"}
        custom = k8s.CustomObjectsApi(k8s.ApiClient(configuration))
        target = ef.PushTarget("gs://b/m", "chicago_taxi", kserve_manifest=True)
        service = push.kserve.inference_service(target, "gs://b/m/chicago_taxi/kserve/1-only",
                                                 1)
        service["metadata"]["namespace"] = "ml"
        service["spec"]["predictor"]["model"]["storage_uri"] = "gs://b/m"
        with pytest.raises(rollout.RolloutError, match="HTTP 422.*storage_uri"):
            rollout.roll_out(custom, service, "ml", timeout=1)
    assert api.applies[0]["body"]["spec"]["predictor"]["model"]["storage_uri"] == "gs://b/m"

"""The RBAC the multi-worker train task needs (``estflow rbac``, pipelines/kubeflow/rbac.py).

The check that matters: the submitter (components/tfjob/) is driven
against recording fakes of the Kubernetes API through its paths (submit, follow, copy logs,
adopt an earlier attempt's job, replace a failed one, read its own pod), for a TFJob and a
TrainJob, and every call it makes must be allowed by the Role. A call the Role lacks would be
an HTTP 403 in the cluster, after the pipeline ran ingest and transform.
"""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from estflow.pipelines import cli
from estflow.pipelines.kubeflow import rbac

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "pipelines" / "kubernetes" / "estflow-train-rbac.yaml"

# Kubernetes client method -> verb (its resource: the custom object's plural, or below).
_VERBS = {"create": "create", "get": "get", "read": "get", "list": "list", "patch": "patch",
          "delete": "delete", "replace": "update"}
_CORE_RESOURCES = {"namespaced_pod": "pods", "namespaced_pod_log": "pods/log"}


class _Recorder:
    """A fake API object: records (group, resource, verb) of every call, answers with
    ``answer(method, args, kwargs)``."""

    def __init__(self, answer, calls):
        self._answer, self.calls = answer, calls
        self.api_client = k8s.ApiClient()

    def __getattr__(self, method):
        def call(*args, **kwargs):
            verb, _, rest = method.partition("_")
            if rest.endswith("custom_object"):
                group, resource = args[0], args[3]
            else:
                group, resource = "", _CORE_RESOURCES[rest]
            self.calls.append((group, resource, _VERBS[verb]))
            return self._answer(method, args, kwargs)
        return call


def _scenario(kind_name: str, existing_state: str | None):
    """Fake clients where the job succeeds; ``existing_state``: a job of that name already
    exists (an earlier attempt's) in that state."""
    from estflow.components.tfjob import follow

    kind = follow.TFJOB if kind_name == "tfjob" else follow.TRAINJOB
    done = {"tfjob": [{"type": "Succeeded", "status": "True"}],
            "trainjob": [{"type": "Complete", "status": "True"}]}[kind_name]
    failed = [{"type": "Failed", "status": "True", "message": "boom"}]
    state = {"created": existing_state is None, "deleted": False, "ours": False}

    def custom(method, args, kwargs):
        if method.startswith("create"):
            if not state["created"]:
                state["created"] = True
                raise ApiException(status=409, reason="AlreadyExists")
            state["ours"] = True
            return args[4]
        if method.startswith("get"):
            if state["deleted"]:
                state["deleted"] = False
                raise ApiException(status=404, reason="NotFound")
            conditions = done if state["ours"] or existing_state == "Running" else failed
            return {"metadata": {"name": args[4], "ownerReferences": []},
                    "status": {"conditions": conditions}}
        if method.startswith("delete"):
            state["deleted"], state["created"] = True, True
        return {}

    def core(method, args, kwargs):
        if method == "list_namespaced_pod":
            pod = SimpleNamespace(metadata=SimpleNamespace(name="job-node-0"),
                                  status=SimpleNamespace(phase="Succeeded"))
            return SimpleNamespace(items=[pod])
        if method == "read_namespaced_pod_log":
            return "trained\n"
        return k8s.V1Pod(metadata=k8s.V1ObjectMeta(name=args[0], namespace=args[1], uid="u1"),
                         spec=k8s.V1PodSpec(containers=[], service_account_name="runner"))

    if kind_name == "tfjob":
        spec = {"tfReplicaSpecs": {"Worker": {"replicas": 2}}}
    else:
        spec = {"trainer": {"numNodes": 2}, "runtimeRef": {"name": "estflow"}}
    manifest = {"metadata": {"name": "taxi-train", "namespace": "ml"}, "spec": spec}
    return kind, custom, core, manifest


@pytest.mark.parametrize("existing_state", [None, "Running", "Failed"],
                         ids=["new", "adopted", "replaced"])
@pytest.mark.parametrize("kind_name", ["tfjob", "trainjob"])
def test_every_call_of_the_submitter_is_allowed_by_the_role(kind_name, existing_state):
    from estflow.components.tfjob import __main__ as tfjob
    from estflow.components.tfjob import follow

    kind, custom, core, manifest = _scenario(kind_name, existing_state)
    calls: list = []
    clients = follow.Clients(custom=_Recorder(custom, calls), core=_Recorder(core, calls),
                             sleep=lambda s: None, clock=lambda: 0.0)
    owner = {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u1"}
    follow.run_job(clients, kind, [manifest], poll_seconds=0, echo=lambda line: None,
                   owner=owner)
    tfjob.read_submitter(clients.core, {"KFP_POD_NAME": "p", "NAMESPACE": "ml"}, None,
                         echo=lambda line: None)
    documents = rbac.manifests("ml", "pipeline-runner")
    assert calls, "the submitter made no call"
    denied = sorted({c for c in calls if not rbac.allows(documents, *c)})
    assert not denied, f"calls the Role does not allow: {denied}"
    if existing_state == "Running":
        assert (kind.group, kind.plural, "patch") in calls  # adopting adds this pod as owner


def test_the_manifests_are_valid_kubernetes_objects():
    """Each document deserialises into the kubernetes client's model and back unchanged (a
    misspelled field would be dropped)."""
    api = k8s.ApiClient()
    documents = rbac.manifests("team-a", "estflow-runner", create_service_account=True)
    assert [d["kind"] for d in documents] == ["ServiceAccount", "Role", "RoleBinding"]
    for document in documents:
        model = api.deserialize(SimpleNamespace(data=json.dumps(document)),
                                f"V1{document['kind']}")
        assert api.sanitize_for_serialization(model) == document
    binding = documents[2]
    assert binding["roleRef"]["name"] == documents[1]["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "estflow-runner",
                                    "namespace": "team-a"}]
    with pytest.raises(ValueError, match="namespace"):
        rbac.manifests("Team A")


def test_the_shipped_file_is_the_rendering_for_a_standalone_kfp():
    assert SHIPPED.read_text() == rbac.render(rbac.manifests()), (
        f"{SHIPPED} is out of date: estflow rbac -o {SHIPPED.relative_to(REPO)}")
    assert [d["kind"] for d in yaml.safe_load_all(SHIPPED.read_text())] == ["Role", "RoleBinding"]


def test_the_shipped_file_is_the_only_rbac_manifest():
    """One source of truth: `estflow rbac`'s rendering. A second hand-written Role (there was
    pipelines/docker/train-rbac.yaml, with another Role name) drifts from what the submitter
    calls, and two names make a cluster hold both."""
    roles = [path.relative_to(REPO) for path in (REPO / "pipelines").rglob("*.y*ml")
             if any((d or {}).get("kind") in ("Role", "ClusterRole")
                    for d in yaml.safe_load_all(path.read_text()))]
    assert roles == [SHIPPED.relative_to(REPO)]


def test_cli_rbac(tmp_path, capsys):
    out = tmp_path / "rbac.yaml"
    assert cli.main(["rbac", "-o", str(out), "--namespace", "kubeflow-user",
                     "--service-account", "default-editor"]) == 0
    assert "kubectl apply -f" in capsys.readouterr().out
    documents = list(yaml.safe_load_all(out.read_text()))
    assert documents == rbac.manifests("kubeflow-user", "default-editor")
    assert cli.main(["rbac", "-o", str(out), "--namespace", "Bad_NS"]) == 2
    assert "namespace" in capsys.readouterr().err

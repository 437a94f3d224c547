"""The RBAC the hyperparameter search's task needs (components/_runtime/katib.py).

The task's Kubernetes calls are listed once, in the task module (``API_CALLS``). The first test
drives the task through each of its paths (create and follow, adopt an earlier attempt's
Experiment, a failed search, the timeout, a stop) against ``FakeKatibApi`` (a fake Kubernetes
API the test starts on 127.0.0.1, an ``http.server`` in a thread, and stops when it ends) and
checks that the calls it made are exactly ``API_CALLS``. The second checks that the Role
estflow ships (pipelines/kubernetes/estflow-train-rbac.yaml, the rendering of ``estflow
rbac``) grants exactly those on ``experiments.kubeflow.org``: a call the Role lacks would be
an HTTP 403 in the cluster, after the pipeline ran ingest and transform.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s

from estflow.components._runtime import katib as task
from estflow.dsl import Choice
from estflow.dsl import Tune
from estflow.pipelines.kubeflow import katib
from tests.pipelines.fake_kubernetes_api import FakeKatibApi

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "pipelines" / "kubernetes" / "estflow-train-rbac.yaml"


def _allows(documents, group: str, resource: str, verb: str) -> bool:
    """Whether a Role among ``documents`` grants ``verb`` on ``resource`` of ``group``."""
    return any(group in rule["apiGroups"] and resource in rule["resources"]
               and verb in rule["verbs"]
               for document in documents if document and document["kind"] == "Role"
               for rule in document["rules"])


def _granted(documents, group: str, resource: str) -> set[str]:
    return {verb for document in documents if document and document["kind"] == "Role"
            for rule in document["rules"]
            if group in rule["apiGroups"] and resource in rule["resources"]
            for verb in rule["verbs"]}


def _experiment():
    tune = Tune({"model.optimizer": Choice(("Adagrad", "Adam"))}, objective="auc", trials=2,
                algorithm="random", max_failures=1)
    return katib.experiment(tune, name="rbac-tune", namespace="ml", image="estflow:1",
                            command=["python", "-m", "trial"], trial_resources=None)


def test_api_calls_are_exactly_the_calls_the_task_makes(tmp_path):
    experiment = _experiment()
    calls: set[tuple[str, str, str]] = set()
    quiet = {"poll_seconds": 0, "echo": lambda line: None}

    def api(fake):
        configuration = k8s.Configuration()
        configuration.host = fake.url
        return k8s.CustomObjectsApi(k8s.ApiClient(configuration))

    with FakeKatibApi() as fake:  # create, follow; then adopt it (409, get)
        task.run_search(api(fake), experiment, tmp_path / "1", **quiet)
        task.run_search(api(fake), experiment, tmp_path / "2", **quiet)
        calls |= set(fake.calls)
    with FakeKatibApi(outcome="failed") as fake:
        with pytest.raises(task.SearchFailed):
            task.run_search(api(fake), experiment, tmp_path / "3", **quiet)
        calls |= set(fake.calls)
    with FakeKatibApi(outcome="endless") as fake:  # the timeout deletes it
        clock = iter(range(0, 10**6, 10))
        task.run_search(api(fake), experiment, tmp_path / "4", poll_seconds=0,
                        echo=lambda line: None, timeout_s=5, clock=lambda: next(clock))
        calls |= set(fake.calls)

    def stop(seconds):
        raise KeyboardInterrupt

    with FakeKatibApi(outcome="endless") as fake:  # a stopped task deletes it
        with pytest.raises(KeyboardInterrupt):
            task.run_search(api(fake), experiment, tmp_path / "5", poll_seconds=1,
                            echo=lambda line: None, sleep=stop)
        calls |= set(fake.calls)
    assert calls == set(task.API_CALLS)
    assert json.loads((tmp_path / "1" / "best.json").read_text())["objective"] == "auc"


def _rbac_module():
    return importlib.import_module("estflow.pipelines.kubeflow.rbac")


def test_the_shipped_role_grants_exactly_what_the_task_calls():
    shipped = [d for d in yaml.safe_load_all(SHIPPED.read_text()) if d]
    generated = _rbac_module().manifests()
    for documents in (shipped, generated):
        denied = [call for call in task.API_CALLS if not _allows(documents, *call)]
        assert not denied, f"calls the Role does not allow: {denied}"
        for group, resource in {(g, r) for g, r, _ in task.API_CALLS}:
            needed = {verb for g, r, verb in task.API_CALLS if (g, r) == (group, resource)}
            assert _granted(documents, group, resource) == needed, (group, resource)
        # the task reads neither trials nor suggestions
        assert not _granted(documents, "kubeflow.org", "trials")
        assert not _granted(documents, "kubeflow.org", "suggestions")

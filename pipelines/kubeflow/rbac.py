"""The Kubernetes RBAC the multi-worker train task needs: its pod submits a training job
(``components/tfjob/``: a Training Operator ``TFJob``, ``kubeflow.org/v1``; Kubeflow Trainer
v2's ``TrainJob``, ``trainer.kubeflow.org``, likewise), follows it and deletes it, with the
credentials of the run's service account.

KFP runs every task of a run under one service account: ``pipeline-runner`` on a standalone
KFP install (namespace ``kubeflow``), ``default-editor`` in a Kubeflow profile namespace (which
already may manage TFJobs through the ``kubeflow-edit`` aggregated role when the Training
Operator is installed), or the one a run names (``estflow submit --service-account``). The
manifests here give that account what the submitter calls (a test drives the submitter against
a recording fake API and checks each call is allowed):

* a ``Role`` (namespaced): create, get, list, watch, patch (adopting the job of an earlier
  attempt) and delete ``tfjobs.kubeflow.org`` and ``trainjobs.trainer.kubeflow.org``; get and
  list ``pods`` (the task reads its own pod: service account, pull secrets, owner; and lists
  the job's pods) and get ``pods/log`` (copied into the task's log);
* a ``RoleBinding`` of it to the service account;
* the ``ServiceAccount`` itself, only when asked (``create_service_account``): a new account also
  needs whatever KFP's own runner account has (Argo's and the KFP launcher's permissions), so
  binding the Role to the existing account is the usual choice.

``estflow rbac -o rbac.yaml [--namespace NS] [--service-account SA]`` writes them;
``pipelines/kubernetes/estflow-train-rbac.yaml`` is the rendering for a standalone KFP.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from estflow.dsl.contracts import TFJOB

__all__ = ["ROLE_NAME", "RULES", "DEFAULT_NAMESPACE", "DEFAULT_SERVICE_ACCOUNT", "manifests",
           "render", "allows"]

ROLE_NAME = "estflow-training-jobs"
DEFAULT_NAMESPACE = "kubeflow"
DEFAULT_SERVICE_ACCOUNT = "pipeline-runner"
_VERBS = ["create", "get", "list", "watch", "patch", "delete"]
RULES: list[dict[str, Any]] = [
    {"apiGroups": ["kubeflow.org"], "resources": ["tfjobs"], "verbs": _VERBS},
    {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"], "verbs": _VERBS},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    # the push step's KServe rollout (server-side apply: create or patch, then read status)
    {"apiGroups": ["serving.kserve.io"], "resources": ["inferenceservices"],
     "verbs": ["get", "create", "patch"]},
    # the tune step on Katib (components/_runtime/katib.py's API_CALLS): create the Experiment,
    # follow it, delete it when stopped
    {"apiGroups": ["kubeflow.org"], "resources": ["experiments"],
     "verbs": ["create", "get", "delete"]},
]
_LABELS = {"app.kubernetes.io/part-of": "estflow", "app.kubernetes.io/component": TFJOB.name}
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def manifests(namespace: str = DEFAULT_NAMESPACE,
              service_account: str = DEFAULT_SERVICE_ACCOUNT, *,
              create_service_account: bool = False) -> list[dict[str, Any]]:
    """The RBAC objects (ServiceAccount when asked, Role, RoleBinding) as dicts.

    Raises:
        ValueError: ``namespace`` or ``service_account`` is not a valid Kubernetes name.
    """
    if not isinstance(namespace, str) or not _DNS_LABEL.match(namespace):
        raise ValueError("Received an invalid value for `namespace`, expected a Kubernetes "
                         f"namespace (lowercase letters, digits, '-'). Received: {namespace!r}")
    if not isinstance(service_account, str) or not _DNS_SUBDOMAIN.match(service_account):
        raise ValueError("Received an invalid value for `service_account`, expected a "
                         "Kubernetes service account name. Received: "
                         f"{service_account!r}")
    metadata = {"name": ROLE_NAME, "namespace": namespace, "labels": dict(_LABELS)}
    documents: list[dict[str, Any]] = []
    if create_service_account:
        documents.append({"apiVersion": "v1", "kind": "ServiceAccount",
                          "metadata": {**metadata, "name": service_account}})
    documents.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                      "metadata": metadata, "rules": [dict(r) for r in RULES]})
    documents.append({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {**metadata, "name": f"{ROLE_NAME}-{service_account}"[:253]},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE_NAME},
        "subjects": [{"kind": "ServiceAccount", "name": service_account,
                      "namespace": namespace}]})
    return documents


def render(documents: list[dict[str, Any]]) -> str:
    """The documents as one deterministic YAML stream, with a header saying what it is for."""
    header = ("# estflow: RBAC for the multi-worker train task, which creates, follows and\n"
              "# deletes a TFJob (kubeflow.org) or TrainJob (trainer.kubeflow.org), reads its\n"
              "# own pod and the job's pods' logs, and for the tune task, which creates, follows\n"
              "# and deletes a Katib Experiment, with the run's service account.\n"
              "# Apply: kubectl apply -f THIS_FILE\n"
              "# Generated by `estflow rbac`; see estflow.pipelines.kubeflow.rbac.\n")
    plain = json.loads(json.dumps(documents))  # no shared objects: no YAML anchors
    return header + yaml.safe_dump_all(plain, sort_keys=False, explicit_start=True)


def allows(documents: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    """Whether a Role among ``documents`` grants ``verb`` on ``resource`` of API ``group``."""
    return any(group in rule["apiGroups"] and resource in rule["resources"]
               and verb in rule["verbs"]
               for document in documents if document["kind"] == "Role"
               for rule in document["rules"])

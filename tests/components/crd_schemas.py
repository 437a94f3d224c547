"""The real CustomResourceDefinition schemas of the training jobs estflow submits, and a strict
validator over them (tests/components/schemas/, see its README for versions and sources).

The API server prunes fields its schema does not declare, silently unless a request asks for
``fieldValidation=Strict``: a misspelled field would be dropped, not refused. The validator here
is stricter than the server's default: an object schema that declares ``properties`` and
neither ``additionalProperties`` nor ``x-kubernetes-preserve-unknown-fields`` accepts no other
key. CEL rules (``x-kubernetes-validations``) are not evaluated.

``python -m tests.components.crd_schemas UPSTREAM.yaml OUT.yaml "SOURCE"`` writes an upstream
CRD file without its descriptions (they are most of its size), with a header naming SOURCE and
the upstream file's SHA-256.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import sys
from pathlib import Path
from typing import Any

import jsonschema
import yaml

SCHEMAS = Path(__file__).with_name("schemas")

# name -> file: the CRDs the tests validate against, one per release estflow supports.
CRDS = {
    "tfjob-v1.9.3": "kubeflow.org_tfjobs.v1.9.3.yaml",
    "trainjob-v2.1.0": "trainer.kubeflow.org_trainjobs.v2.1.0.yaml",
    "trainjob-v2.2.1": "trainer.kubeflow.org_trainjobs.v2.2.1.yaml",
    "clustertrainingruntime-v2.1.0": "trainer.kubeflow.org_clustertrainingruntimes.v2.1.0.yaml",
    "clustertrainingruntime-v2.2.1": "trainer.kubeflow.org_clustertrainingruntimes.v2.2.1.yaml",
}


@functools.cache
def crd(name: str) -> dict[str, Any]:
    """The CRD document ``name`` (a key of :data:`CRDS`)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the files are large
    return yaml.load((SCHEMAS / CRDS[name]).read_text(), Loader=loader)  # noqa: S506


@functools.cache
def _validator(name: str) -> jsonschema.protocols.Validator:
    (version,) = crd(name)["spec"]["versions"]
    schema = _strict(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft4Validator)
    cls.check_schema(schema)
    return cls(schema)


def errors(name: str, manifest: dict[str, Any]) -> list[str]:
    """Every way ``manifest`` breaks CRD ``name``'s schema (empty: valid), plus a mismatch of
    its apiVersion/kind with the CRD's."""
    spec = crd(name)["spec"]
    (version,) = spec["versions"]
    found = [f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
             for e in _validator(name).iter_errors(manifest)]
    expected = (f"{spec['group']}/{version['name']}", spec["names"]["kind"])
    if (manifest.get("apiVersion"), manifest.get("kind")) != expected:
        found.append(f"apiVersion/kind: expected {expected}, received "
                     f"{(manifest.get('apiVersion'), manifest.get('kind'))}")
    return found


def _strict(node: Any) -> Any:
    """Close every object schema that lists its properties (see the module docstring)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("properties", "patternProperties"):
                for sub in value.values():
                    _strict(sub)
            elif key != "enum":
                _strict(value)
        if ("properties" in node and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")):
            node["additionalProperties"] = False
    elif isinstance(node, list):
        for item in node:
            _strict(item)
    return node


def _without_descriptions(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_descriptions(v) for k, v in node.items()
                if not (k == "description" and isinstance(v, str))}
    if isinstance(node, list):
        return [_without_descriptions(v) for v in node]
    return node


def strip(upstream: Path, out: Path, source: str) -> None:
    data = upstream.read_bytes()
    body = yaml.safe_dump(_without_descriptions(yaml.safe_load(data)), sort_keys=False)
    header = (f"# {source}\n# sha256 of the upstream file: {hashlib.sha256(data).hexdigest()}\n"
              "# Descriptions removed (tests/components/crd_schemas.py); nothing else changed.\n")
    out.write_text(header + body)


if __name__ == "__main__":
    strip(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])

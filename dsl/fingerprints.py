"""Step fingerprints: the part of the spec each step reads, and the cache key covering it.

A step's cache key is a SHA-256 over what the step's result depends on:

* estflow's own code (its version and a digest of the step code, so an upgrade reruns);
* the step's name and the part of the spec it reads (:func:`project`, from the contract table's
  ``Step.reads``); the step is *given* only that part, so it cannot read what its key misses;
* the fingerprints of its input artifacts (each the key of the step that wrote it);
* what it reads outside its artifacts: the source data (ingest: content hashes of local
  files, generation/etag/size of bucket objects), the user functions its spec names (their
  source and their helpers', see ``estflow.components._io.user_code``), and for a step that reads the push target the served version (number and model
  fingerprint): evaluate's baseline, and a train step that declares ``TrainSpec.warm_start``
  (it starts from that version's checkpoint, so a model trained from another start is never
  reused; such a step reads ``push.base_path`` and ``push.model_name``, see
  :func:`step_reads`).

What a step's key covers is about content, never place: in the part of the spec it reads, each
user function's reference (module, name, file) stands as its code digest, and a local source's
path (its files' content is hashed) as :data:`UNREAD`; the step itself still gets the spec with
both (it imports the function, reads the files). A pipeline renamed, copied or run from another
checkout or CI workspace reuses every step.

Same key, same work: a runner may reuse the step's earlier outputs instead of running it
(``estflow run`` locally, KFP's cache on Kubeflow, where the keys are task inputs). A step with
side effects (push) is never reused, nor is any step after it that reads its outputs.

The facts that need the outside world (files, buckets, user code) are gathered by the
fingerprint step (``estflow.components.fingerprint``); this module only combines them, so the
local runner and the KFP task compute the same keys.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

from estflow.dsl import models as m
from estflow.dsl.pipeline import Pipeline
from estflow.dsl.refs import CallableRef
from estflow.dsl.serialization import to_dict
from estflow.dsl.sources import CsvSource
from estflow.dsl.specs import Derive
from estflow.dsl.specs import EvalSpec
from estflow.dsl.specs import PushTarget
from estflow.dsl.specs import RunConfig
from estflow.dsl.specs import Split
from estflow.dsl.specs import TrainSpec

__all__ = ["StepKeyInput", "Facts", "StepKey", "project", "digest", "artifact_fingerprint",
           "callable_refs", "callable_paths", "keyed_spec", "reads_field", "step_reads",
           "step_keys", "baseline_key", "UNREAD"]

UNREAD = "unread"
"""The value standing for a part of the spec a step does not read (e.g. a source path)."""
_UNREAD_FN = CallableRef("estflow.dsl.fingerprints", UNREAD)  # a function a step never runs


@dataclasses.dataclass(frozen=True)
class StepKeyInput:
    """What keying a step needs of its plan entry: its name, input artifacts (artifact name,
    producing step), outputs, the spec parts it reads (None: all), whether it has side
    effects, its entry module (whose code its key covers) and its options. Travels as JSON
    (:meth:`list_to_json`, :meth:`list_from_json`) to the fingerprint task."""

    name: str
    inputs: tuple[tuple[str, str], ...]
    outputs: tuple[str, ...]
    reads: tuple[str, ...] | None = None
    side_effects: bool = False
    module: str | None = None
    options: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict:
        return {"name": self.name, "inputs": [list(i) for i in self.inputs],
                "outputs": list(self.outputs),
                "reads": None if self.reads is None else list(self.reads),
                "side_effects": self.side_effects, "module": self.module,
                "options": [list(o) for o in self.options]}

    @staticmethod
    def list_to_json(steps: Sequence[StepKeyInput]) -> str:
        return json.dumps([s.to_dict() for s in steps], sort_keys=True, separators=(",", ":"))

    @staticmethod
    def list_from_json(text: str) -> list[StepKeyInput]:
        return [StepKeyInput(name=d["name"], inputs=tuple(tuple(i) for i in d["inputs"]),
                         outputs=tuple(d["outputs"]),
                         reads=None if d.get("reads") is None else tuple(d["reads"]),
                         side_effects=bool(d.get("side_effects", False)),
                         module=d.get("module"),
                         options=tuple(tuple(o) for o in d.get("options", ())))
                for d in json.loads(text)]


@dataclasses.dataclass(frozen=True)
class Facts:
    """What the fingerprint step read outside the spec (all JSON values).

    Attributes:
        estflow: estflow's version and code digest.
        source: the source data's fingerprint (``{"digest": ...}`` plus what it covers).
        code: where a user function is named in the spec (``"derive.fn"``,
            ``"model.model_fn"``, :func:`callable_paths`) -> digest of its code.
        served: the version served at the push target: ``{"version", "fingerprint",
            "evaluated_against"}`` (the last: ``{"version", "fingerprint"}`` of the version it
            was evaluated against before its push, from its lineage); None when nothing is
            served (or there is no push target).
        functions: what each code digest covers (``{"function", "digest", "parts"}`` by
            spec path), for people (``estflow runs diff``); no part of a key.
    """

    estflow: Mapping[str, Any]
    source: Mapping[str, Any]
    code: Mapping[str, str]
    served: Mapping[str, Any] | None = None
    functions: Mapping[str, Any] | None = None


@dataclasses.dataclass(frozen=True)
class StepKey:
    """A step's key, the spec it is given, its inputs' and outputs' fingerprints, whether it
    may be reused, and what outside the spec its key covers (``context``)."""

    key: str
    spec: Pipeline
    inputs: Mapping[str, str]
    outputs: Mapping[str, str]
    cacheable: bool
    context: Mapping[str, Any]

    def to_dict(self) -> dict:
        return {"key": self.key, "spec": self.spec.to_json(), "inputs": dict(self.inputs),
                "outputs": dict(self.outputs), "cacheable": self.cacheable,
                "context": dict(self.context)}


def digest(value: Any) -> str:
    """SHA-256 (hex) of ``value``'s canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def artifact_fingerprint(key: str, artifact: str) -> str:
    """The fingerprint of output ``artifact`` of the step keyed ``key``."""
    return digest({"step": key, "artifact": artifact})


def reads_field(reads: tuple[str, ...] | None, field: str) -> bool:
    """Whether a step with ``reads`` reads (part of) Pipeline field ``field``."""
    return reads is None or any(r == field or r.startswith(field + ".") for r in reads)


_WARM_START_READS = ("push.base_path", "push.model_name")


def step_reads(pipeline: Pipeline, reads: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """``reads`` plus what the declarations make a step read: a step reading ``train`` whose
    ``TrainSpec.warm_start`` is declared also reads where the served version is (the push
    target's ``base_path`` and ``model_name``). Without warm start it does not, so a change
    of push target (or a new push) does not retrain a model that never looks there."""
    if reads is None or not pipeline.trains or "train" not in reads:
        return reads
    if pipeline.train.warm_start is None or pipeline.push is None:
        return reads
    return (*reads, *(r for r in _WARM_START_READS if r not in reads))


def project(pipeline: Pipeline, reads: tuple[str, ...] | None) -> Pipeline:
    """``pipeline`` with every part that ``reads`` does not name replaced by a neutral
    stand-in (None, a default, :data:`UNREAD`), still a valid Pipeline.

    ``reads`` entries: ``"field"`` keeps the field; ``"field.attr"`` keeps one attribute of
    it on a stand-in; ``"model@name"`` makes candidate ``name`` of a
    :class:`~estflow.dsl.models.Candidates` model the model; ``"resources.step"`` keeps one entry of the resources. None keeps all.
    A pipeline that only predicts is kept whole. The reads are completed by
    :func:`step_reads` first.
    """
    reads = step_reads(pipeline, reads)
    if reads is None or not pipeline.trains:
        return pipeline
    changes: dict[str, Any] = {}
    for field in dataclasses.fields(Pipeline):
        name = field.name
        if name in reads or name == "schema_version":
            continue
        parts = [r.split(".", 1)[1] for r in reads if r.startswith(name + ".")]
        value = getattr(pipeline, name)
        picked = [r.split("@", 1)[1] for r in reads if r.startswith(name + "@")]
        if picked:  # "model@linear": the candidate's model, as the step's whole model
            changes[name] = value.models[picked[0]]
            continue
        if name == "resources":
            changes[name] = {k: v for k, v in value.items() if k in parts}
            continue
        if name == "steps":  # the user steps named (a user step's own and its upstream ones)
            changes[name] = tuple(_step_part(s, parts) for s in value
                                  if s.name in parts or any(p.startswith(s.name + "[")
                                                            for p in parts))
            continue
        stand_in = _stand_in(pipeline, name, partly=bool(parts) and value is not None)
        if parts and value is not None:
            kept = {p: getattr(value, p) for p in parts if hasattr(value, p)}
            stand_in = dataclasses.replace(stand_in, **{
                p: v for p, v in kept.items() if hasattr(stand_in, p)})
        changes[name] = stand_in
    return dataclasses.replace(pipeline, **changes)


def _step_part(step: Any, parts: Sequence[str]) -> Any:
    """User step ``step`` as ``parts`` read it: whole (``name``), or one item ``i`` of a mapped
    step (``name[i]``): its items before ``i`` as ``{}`` stand-ins, those after it left out,
    so the item's key covers its own parameters (and its place) only."""
    if step.name in parts:
        return step
    index = next(int(p[len(step.name) + 1:-1]) for p in parts if p.startswith(step.name + "["))
    items = step.items
    return dataclasses.replace(step, over=json.dumps([{}] * index + [items[index]],
                                                     sort_keys=True))


def _stand_in(pipeline: Pipeline, field: str, partly: bool = False) -> Any:
    """The neutral value of an unread field (its default where it has one); ``partly``: of a
    field some attributes of which are read (they are set on it)."""
    if field == "source":
        return CsvSource(UNREAD)
    if field == "model":
        return _model_stand_in(pipeline)
    if field == "train":
        return TrainSpec(max_steps=1)
    if field == "push":
        return PushTarget(UNREAD, UNREAD) if partly else None
    if field == "derive" and partly:
        return Derive(_UNREAD_FN, outputs=pipeline.derive.outputs)
    defaults = {"eval": EvalSpec(), "run_config": RunConfig(), "split": Split()}
    if field in defaults:
        return defaults[field]
    spec = next(f for f in dataclasses.fields(Pipeline) if f.name == field)
    if spec.default is not dataclasses.MISSING:
        return spec.default
    if spec.default_factory is not dataclasses.MISSING:
        return spec.default_factory()
    return getattr(pipeline, field)  # no neutral value: kept


def _model_stand_in(pipeline: Pipeline) -> m.Model:
    """A bias-only model of the same head, consistent with the label (so the projected
    Pipeline validates); ``weight_column`` etc. are copied on it by :func:`project`."""
    head = m.head_of(pipeline.model)
    if head == "regression":
        return m.BaselineRegressor(label_dimension=getattr(pipeline.model, "label_dimension", 1))
    label = pipeline.label
    if label.dtype == "string" and label.vocabulary:
        classes = len(label.vocabulary)
    else:
        classes = getattr(pipeline.model, "n_classes", None) or (2 if head == "binary" else 3)
    return m.BaselineClassifier(n_classes=classes)


def callable_refs(value: Any) -> list[CallableRef]:
    """Every :class:`CallableRef` inside a declaration (the user functions it names)."""
    found: list[CallableRef] = []
    if isinstance(value, CallableRef):
        if value != _UNREAD_FN:
            found.append(value)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            found += callable_refs(getattr(value, field.name))
    elif isinstance(value, (list, tuple)):
        for item in value:
            found += callable_refs(item)
    elif isinstance(value, Mapping):
        for item in value.values():
            found += callable_refs(item)
    return found


def callable_paths(pipeline: Pipeline) -> dict[str, CallableRef]:
    """Where the spec names a user function (paths as ``runs diff`` writes them: ``derive.fn``,
    ``model.model_fn``, ``x[0].fn``) -> its reference; stand-ins left out."""
    found: dict[str, CallableRef] = {}

    def collect(path: str, ref: dict) -> dict:
        found[path] = _ref(ref)
        return ref

    _map_refs(to_dict(pipeline), collect)
    return {p: r for p, r in found.items() if r != _UNREAD_FN}


def keyed_spec(spec: Pipeline, facts: Facts, reads: tuple[str, ...] | None) -> dict:
    """What of the projected ``spec`` a key covers: its JSON form, each user function's
    reference replaced by its code digest (``{"kind": "code", "digest"}``) and, when the
    source's digest hashes the files' content (``by_content``), the source path by
    :data:`UNREAD`: where the code and the data are is no part of a key."""
    def by_digest(path: str, ref: dict) -> dict:
        if _ref(ref) == _UNREAD_FN:
            return ref
        return {"kind": "code", "digest": facts.code.get(path)}

    tree = _map_refs(to_dict(spec), by_digest)
    source = tree.get("source")
    if (reads_field(reads, "source") and facts.source.get("by_content")
            and isinstance(source, dict) and "path" in source):
        tree["source"] = {**source, "path": UNREAD}
    return tree


def _ref(data: dict) -> CallableRef:
    return CallableRef(**{k: v for k, v in data.items() if k != "kind"})


def _map_refs(tree: Any, change: Any, path: str = "") -> Any:
    """``tree`` (a spec's :func:`to_dict` form) with each CallableRef object at path P
    replaced by ``change(P, ref)``."""
    if isinstance(tree, list):  # a user step by its name: the same path in every projection
        return [_map_refs(v, change, f"{path}[{v['name'] if _is_user_step(v) else i}]")
                for i, v in enumerate(tree)]
    if not isinstance(tree, dict):
        return tree
    kind = tree.get("kind")
    if kind == "CallableRef":
        return change(path, tree)
    if kind == "dict":
        return {**tree, "items": {k: _map_refs(v, change, f"{path}.{k}" if path else k)
                                  for k, v in tree["items"].items()}}
    return {k: v if k == "kind" else _map_refs(v, change, f"{path}.{k}" if path else k)
            for k, v in tree.items()}


def _is_user_step(tree: Any) -> bool:
    return isinstance(tree, dict) and tree.get("kind") == "UserStep"


def baseline_key(version: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What of a baseline version keys a step: its number and model fingerprint (None: no
    baseline). A pushed version's lineage records its evaluation's baseline so (its
    ``evaluated_against``), for :func:`step_keys` to compare."""
    if not isinstance(version, Mapping):
        return None
    return {"version": version.get("version"), "fingerprint": version.get("fingerprint")}


def step_keys(pipeline: Pipeline, steps: Sequence[StepKeyInput], facts: Facts, *,
              code_by_step: Mapping[str, str] | None = None) -> dict[str, StepKey]:
    """Key every step of a plan (in plan order) from the full spec and the outside facts;
    ``code_by_step``: step name -> digest of the code it runs (see ``Facts.estflow``)."""
    fingerprints: dict[str, str] = {}  # artifact name -> fingerprint of its latest writer
    uncacheable: set[str] = set()  # artifacts written by a step that is never reused
    keys: dict[str, StepKey] = {}
    served = dict(facts.served) if facts.served else None
    for step in steps:
        reads = step_reads(pipeline, step.reads)
        spec = project(pipeline, reads)
        inputs = {artifact: fingerprints[artifact] for artifact, _ in step.inputs}
        context: dict[str, Any] = {}
        if reads_field(reads, "source"):
            context["source"] = facts.source.get("digest")
        functions = sorted(callable_paths(spec))
        if functions:
            context["code"] = {p: facts.code.get(p) for p in functions}
        if reads_field(reads, "push") and spec.push is not None:
            # A model is never its own baseline: a candidate that is the served version keys
            # as it did when it was evaluated before its push, against the version it was
            # evaluated against then (its lineage's ``evaluated_against``; None: none), so
            # that evaluation is reused (a rerun on the same data after a push reruns
            # nothing). Comparing it with itself would bless it as having no baseline does.
            # (With Candidates the served model may be any candidate this plan trains: each
            # candidate's evaluation keys so, not only the picked one's.)
            made = {*inputs.values(), *fingerprints.values()}
            same = served is not None and served.get("fingerprint") in made
            context["served"] = (baseline_key(served.get("evaluated_against")) if same else
                                 baseline_key(served))
        cacheable = not step.side_effects and not any(a in uncacheable for a, _ in step.inputs)
        estflow = {**facts.estflow, "code": (code_by_step or {}).get(step.name)}
        key = digest({"estflow": estflow, "step": step.name, "options": list(step.options),
                      "spec": keyed_spec(spec, facts, reads), "inputs": inputs,
                      "context": context})
        outputs = {a: artifact_fingerprint(key, a) for a in step.outputs}
        fingerprints.update(outputs)
        if not cacheable:
            uncacheable.update(step.outputs)
        keys[step.name] = StepKey(key, spec, inputs, outputs, cacheable, context)
    return keys

"""tf.estimator 2.15's whole public surface against estflow's engine.

``tf215_surface.json`` (written by ``record_surface_tf215.py`` on TF 2.15.1 +
tensorflow-estimator 2.15.0) lists every public name of ``tf.estimator`` and
``tf.compat.v1.estimator``, submodules included, with each constructor's or function's
parameters. Each name goes through ``estflow migrate`` as a user's program would name it
(``tf.compat.v1.estimator.tpu.TPUEstimator``), then:

- migrate rewrites it to an estflow name: that name must exist in ``estflow.estimator``, be the
  same kind, and take every 2.15 parameter by name, the positional ones in 2.15's order, with no
  required parameter 2.15 lacks (except where :data:`SIGNATURE_GAPS` says why not);
- or migrate leaves it and names a replacement (``pipelines/migrate_surface.py``'s ``REPLACED``,
  the committed table): the engine's name of the same path must raise
  ``UnavailableError`` naming that replacement when used.

Anything else is a missing name; there must be none. The coverage line is printed (``-s``)
and stated in README.md and docs/pages/estimator.md.
"""

from __future__ import annotations

import importlib
import inspect
import json
from pathlib import Path

import pytest

from estflow.pipelines.migrate import migrate_source
from estflow.pipelines.migrate_surface import REPLACED

SURFACE = json.loads((Path(__file__).parent / "tf215_surface.json").read_text())
NAMES = SURFACE["names"]
_POSITIONAL = ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")

# Names whose estflow signature differs from 2.15's, and why (each checked to still differ,
# so a fixed one leaves this table).
_V1_PARTITIONER = ("tf.compat.v1.estimator's premade classes take TF 1's partitioner (input_layer_pa"
                    "rtitioner/partitioner) before config; estflow has TF 2's signature (no partition"
                    "ed variables), so config and later arguments must be passed by name")
SIGNATURE_GAPS: dict[str, str] = {
    "compat.v1.estimator.DNNClassifier": _V1_PARTITIONER,
    "compat.v1.estimator.DNNEstimator": _V1_PARTITIONER,
    "compat.v1.estimator.DNNLinearCombinedClassifier": _V1_PARTITIONER,
    "compat.v1.estimator.DNNLinearCombinedEstimator": _V1_PARTITIONER,
    "compat.v1.estimator.DNNLinearCombinedRegressor": _V1_PARTITIONER,
    "compat.v1.estimator.DNNRegressor": _V1_PARTITIONER,
    "compat.v1.estimator.EstimatorSpec": "estflow's adds optimizer (the Keras optimizer the engine checkpoints) after export_outputs; scaffold is accepted after the hooks: pass the hooks and scaffold by name",
    "compat.v1.estimator.LinearClassifier": _V1_PARTITIONER,
    "compat.v1.estimator.LinearEstimator": _V1_PARTITIONER,
    "compat.v1.estimator.LinearRegressor": _V1_PARTITIONER,
    "compat.v1.estimator.MultiLabelHead": 'no classes_for_class_based_metrics (per-class metrics by class id not implemented)',
    "compat.v1.estimator.NanLossDuringTrainingError": "the engine's error carries the step (NanLossError(step)); programs catch it, they do not raise it",
    "compat.v1.estimator.RunConfig": 'no device_fn, protocol, experimental_distribute, experimental_max_worker_delay_secs, session_creation_timeout_secs, checkpoint_save_graph_def (TF 1 session and graph settings); eval_distribute comes right after train_distribute',
    "compat.v1.estimator.SessionRunArgs": 'no feed_dict or options (TF 2 has no session.run feeds)',
    "compat.v1.estimator.SessionRunValues": "results, global_step, steps (the engine's loop values), no options/run_metadata; hooks receive it, they do not build it",
    "compat.v1.estimator.export.PredictOutput": "estflow's takes its dict as value, not outputs: PredictOutput(outputs) positionally works, PredictOutput(outputs=...) does not",
    "compat.v1.estimator.export.ServingInputReceiver": "estflow's is built from a features function and TensorSpecs (TF 2 has no placeholders); build_*_serving_input_receiver_fn cover the 2.15 uses",
    "estimator.EstimatorSpec": "estflow's adds optimizer (the Keras optimizer the engine checkpoints) after export_outputs; scaffold is accepted after the hooks: pass the hooks and scaffold by name",
    "estimator.MultiLabelHead": 'no classes_for_class_based_metrics (per-class metrics by class id not implemented)',
    "estimator.NanLossDuringTrainingError": "the engine's error carries the step (NanLossError(step)); programs catch it, they do not raise it",
    "estimator.RunConfig": 'no device_fn, protocol, experimental_distribute, experimental_max_worker_delay_secs, session_creation_timeout_secs, checkpoint_save_graph_def (TF 1 session and graph settings); eval_distribute comes right after train_distribute',
    "estimator.SessionRunArgs": 'no feed_dict or options (TF 2 has no session.run feeds)',
    "estimator.SessionRunValues": "results, global_step, steps (the engine's loop values), no options/run_metadata; hooks receive it, they do not build it",
    "estimator.export.PredictOutput": "estflow's takes its dict as value, not outputs: PredictOutput(outputs) positionally works, PredictOutput(outputs=...) does not",
    "estimator.export.ServingInputReceiver": "estflow's is built from a features function and TensorSpecs (TF 2 has no placeholders); build_*_serving_input_receiver_fn cover the 2.15 uses",
}


def estflow_name(path: str) -> str | None:
    """What ``estflow migrate`` makes of ``tf.<path>``: the estflow path under
    ``estflow.estimator`` (``""`` for the package itself), or None when it leaves it."""
    m = migrate_source(f"import tensorflow as tf\nobj = tf.{path}\n")
    line = m.source.splitlines()[-1]
    if "tf." in line:
        return None
    rest = line.removeprefix("obj = ")
    head, _, tail = rest.partition(".")
    assert head == "estimator", line
    return tail


def resolve(dotted: str):
    obj = importlib.import_module("estflow.estimator")
    for part in filter(None, dotted.split(".")):
        obj = getattr(obj, part)
    return obj


def kind_of(obj) -> str:
    if inspect.ismodule(obj):
        return "module"
    return "class" if inspect.isclass(obj) else "function" if callable(obj) else "constant"


def signature_problems(path: str, obj) -> list[str]:
    """How ``obj``'s signature fails 2.15's for ``path`` (empty: compatible)."""
    theirs = [p for p in NAMES[path].get("signature") or []
              if p["kind"] not in ("VAR_POSITIONAL", "VAR_KEYWORD")]
    params = inspect.signature(obj).parameters
    ours = [p for p in params.values() if p.name != "self"]
    takes_any = any(p.kind is p.VAR_KEYWORD for p in ours)
    names = {p.name for p in ours}
    problems = [f"no parameter {p['name']!r}" for p in theirs
                if p["name"] not in names and not takes_any]
    their_pos = [p["name"] for p in theirs if p["kind"] in _POSITIONAL]
    our_pos = [p.name for p in ours if p.kind.name in _POSITIONAL]
    if our_pos[:len(their_pos)] != their_pos and not (not their_pos and not our_pos):
        problems.append(f"positional order {our_pos} is not 2.15's {their_pos}")
    required = {p.name for p in ours if p.default is p.empty and p.kind.name in
                (*_POSITIONAL, "KEYWORD_ONLY")} - {p["name"] for p in theirs}
    problems += [f"requires {name!r}, which 2.15 has not" for name in sorted(required)]
    return problems


def classify(path: str) -> tuple[str, str]:
    """("present" | "incompatible" | "replaced" | "missing", detail)."""
    entry = NAMES[path]
    target = estflow_name(path)
    relative = path.removeprefix("compat.v1.").removeprefix("estimator").lstrip(".")
    if target is None:
        instead = REPLACED.get(relative)
        return ("replaced", instead) if instead else ("missing", "migrate leaves it unreplaced")
    try:
        obj = resolve(target)
    except AttributeError as err:
        return "missing", f"estflow.estimator.{target}: {err}"
    if kind_of(obj) != entry["kind"]:
        return "incompatible", f"a {kind_of(obj)} here, a {entry['kind']} in 2.15"
    problems = signature_problems(path, obj) if entry["kind"] in ("class", "function") else []
    return ("incompatible", "; ".join(problems)) if problems else ("present", target)


@pytest.fixture(scope="module")
def results():
    return {path: classify(path) for path in sorted(NAMES)}


def test_the_recorded_surface_is_2_15s_whole_surface():
    assert SURFACE["versions"]["tensorflow"].startswith("2.15.")
    assert SURFACE["versions"]["tensorflow-estimator"].startswith("2.15.")
    for module in ("estimator.export", "estimator.experimental", "compat.v1.estimator.tpu",
                   "compat.v1.estimator.tpu.experimental", "compat.v1.estimator.inputs"):
        assert NAMES[module]["kind"] == "module"
    for name in ("compat.v1.estimator.tpu.TPUEstimator", "compat.v1.estimator.experimental.KMeans",
                 "estimator.experimental.LinearSDCA", "estimator.experimental.RNNClassifier",
                 "estimator.experimental.InMemoryEvaluatorHook"):
        assert NAMES[name]["kind"] == "class"


def test_every_name_is_here_or_names_its_replacement(results):
    counts = {kind: sorted(p for p, (k, _) in results.items() if k == kind)
              for kind in ("present", "incompatible", "replaced", "missing")}
    total = len(results)
    print(f"\ntf.estimator 2.15 surface: {total} names; {len(counts['present'])} present with a "
          f"compatible signature, {len(counts['incompatible'])} present with a different "
          f"signature, {len(counts['replaced'])} fail at use naming the replacement, "
          f"{len(counts['missing'])} missing")
    for path in counts["incompatible"]:
        print(f"  different: {path}: {results[path][1]}")
    assert counts["missing"] == [], {p: results[p][1] for p in counts["missing"]}
    assert set(counts["incompatible"]) == set(SIGNATURE_GAPS), \
        {p: results[p][1] for p in counts["incompatible"]}


def test_each_replaced_name_fails_at_use_naming_its_replacement(results):
    from estflow.estimator._unavailable import UnavailableError

    replaced = [p for p, (k, _) in results.items() if k == "replaced"]
    assert replaced
    for path in replaced:
        relative = path.removeprefix("compat.v1.").removeprefix("estimator.")
        obj = resolve(relative)  # the engine's name of the same path
        with pytest.raises(UnavailableError) as err:
            obj()
        assert REPLACED[relative] in str(err.value), (path, str(err.value))
        assert path.split(".")[-1] in str(err.value)
        m = migrate_source(f"import tensorflow as tf\nobj = tf.{path}()\n")
        assert [c for c in m.unresolved if REPLACED[relative] in c.message], m.report()


def test_no_replacement_is_left_for_a_name_2_15_does_not_have():
    relatives = {p.removeprefix("compat.v1.").removeprefix("estimator.") for p in NAMES}
    assert set(REPLACED) <= relatives

"""tf.estimator 2.15's whole public surface against estflow's engine.

``tf215_surface.json`` (written by ``record_surface_tf215.py`` on TF 2.15.1 +
tensorflow-estimator 2.15.0) lists every public name of ``tf.estimator`` and
``tf.compat.v1.estimator``, submodules included, with each constructor's or function's
parameters. Each name goes through ``estflow migrate`` as a user's program would name it
(``tf.compat.v1.estimator.tpu.TPUEstimator``), then:

- migrate rewrites it to an estflow name: that name must exist in ``estflow.estimator``, be the
  same kind, and take every 2.15 parameter by name, the positional ones in 2.15's order, with no
  required parameter 2.15 lacks (except where :data:`SIGNATURE_GAPS` says why not);
- or migrate leaves it and names a replacement (``pipelines/migrate/surface.py``'s ``REPLACED``,
  the committed table): the engine's name of the same path must raise
  ``UnavailableError`` naming that replacement when used.

Anything else is a missing name; there must be none. The coverage line is printed (``-s``)
and stated in README.md and docs/pages/estimator.md.

Beyond names and signatures, the file records what ``surface_behaviour.py`` (a tf.estimator
program) got on 2.15; the same program, taken through ``estflow migrate``, runs here and must
get the same (:data:`RETURN_GAPS` and :func:`as_2_15_would_record` say where not, and why):

- ``returns``/``canned``: what ``Estimator.train``/``evaluate``/``predict``/
  ``export_saved_model``/``get_variable_*``... and ``train_and_evaluate`` return, and their
  types (the export path is ``bytes``; programs call ``.decode("utf-8")`` on it);
- ``exports``: each SavedModel's signature keys, method names, input and output keys and
  dtypes, per kind of ``predictions``, ``export_outputs`` and receiver (a single-tensor
  ``predictions`` is served as ``output``);
- ``inputs``: every batch (as row numbers) ``numpy_input_fn``/``pandas_input_fn`` give with
  ``shuffle=False`` over batch sizes and ``num_epochs``, read through the engine's
  ``call_input_fn`` as training reads it; with ``shuffle=True`` (2.15 read through a
  ``RandomShuffleQueue``) the batch sizes and the rows read; features' and labels' keys and
  dtypes.
"""

from __future__ import annotations

import importlib
import inspect
import json
from pathlib import Path

import pytest

from estflow.pipelines.migrate.codemod import migrate_source
from estflow.pipelines.migrate.surface import REPLACED

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


# Recorded behaviours estflow does not match, and why (each checked to still differ).
_PYTHON_SCALARS = ("evaluate() returns Python floats and an int global_step (2.15: numpy.float32 "
                   "and numpy.int64); the keys are 2.15's. The pipeline's evaluator "
                   "(components/train) writes these results as JSON, which numpy scalars are not")
RETURN_GAPS: dict[str, str] = {
    "Estimator.get_variable_value('w')": "a custom model_fn's variables are named by the "
    "engine's store (store/model/NNN_<name>, get_variable_names() lists them), not by graph "
    "scope: get_variable_value('w') raises NotFoundError; premade Estimators also take "
    "tf.estimator's names",
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


# -- behaviours: the migrated surface_behaviour.py against 2.15's record -------------------------
def as_2_15_would_record(key: str, described):
    """What estflow's ``described`` return value reads as under the one documented difference
    of types (:data:`_PYTHON_SCALARS`): evaluate results' Python float/int for numpy.float32/
    numpy.int64."""
    def scalars(d):
        if isinstance(d, dict) and d.get("type") == "dict":
            return {**d, "items": {k: {"float": "numpy.float32", "int": "numpy.int64"}.get(v, v)
                                   for k, v in d["items"].items()}}
        return d

    if key.endswith((".evaluate", "Estimator.evaluate(name=...)")):
        return scalars(described)
    if key == "train_and_evaluate" and isinstance(described, dict):
        first, *rest = described["items"]
        return {**described, "items": [scalars(first), *rest]}
    return described


@pytest.fixture(scope="module")
def program():
    """``surface_behaviour.py`` after ``estflow migrate``, as a module."""
    import types

    m = migrate_source((Path(__file__).parent / "surface_behaviour.py").read_text())
    assert not m.unresolved, m.report()
    module = types.ModuleType("surface_behaviour_migrated")
    exec(compile(m.source, "surface_behaviour_migrated", "exec"), module.__dict__)  # noqa: S102
    return module


def _read(input_fn, how: str, limit: int):
    """(batches, dtypes) of an input_fn as the engine's training reads it."""
    import itertools

    import tensorflow as tf

    from estflow.estimator import ModeKeys
    from estflow.estimator import RunConfig
    from estflow.estimator._engine.calls import call_input_fn

    dataset = call_input_fn(input_fn, {}, RunConfig(), ModeKeys.TRAIN)
    dtypes = tf.nest.map_structure(lambda s: s.dtype.name, dataset.element_spec)
    # a finite run: one batch more than 2.15 read shows a longer run
    stop = limit if how.endswith("first") else limit + 1
    batches = list(itertools.islice(dataset.as_numpy_iterator(), stop))
    return batches, dtypes


def test_input_fns_read_the_batches_2_15_read(program):
    recorded = SURFACE["inputs"]
    cases = program.input_cases()
    assert set(cases) == set(recorded)
    differ = {}
    for case, (input_fn, how) in cases.items():
        want = recorded[case]
        limit = len(want.get("rows", want.get("sizes")))
        batches, dtypes = _read(input_fn, how, limit)
        again = _read(input_fn, how, limit)[0] if how == "exact" else None
        got = program.summarize(batches, dtypes, how, again)
        if got != want:
            differ[case] = {k: (got.get(k), v) for k, v in want.items() if got.get(k) != v}
    assert not differ, differ


def _compare(recorded: dict, got: dict) -> dict:
    problems = {}
    for key, want in recorded.items():
        mine = as_2_15_would_record(key, got.get(key))
        if key in RETURN_GAPS:
            assert mine != want, f"{key} now matches 2.15: remove it from RETURN_GAPS"
            continue
        if mine != want:
            problems[key] = {"2.15": want, "estflow": mine}
    return problems


def test_return_values_and_their_types_are_2_15s(program, tmp_path):
    got = program.returns(str(tmp_path))
    assert got["Estimator.export_saved_model"] == "bytes"
    assert set(got) == set(SURFACE["returns"])
    problems = _compare(SURFACE["returns"], got)
    assert not problems, problems


def without_estflows_fallback_default(recorded: dict, got: dict) -> dict:
    """``got`` without the ``serving_default`` estflow adds where 2.15 wrote none (a
    Classify/Regress output the receiver cannot feed: 2.15 left the export without a default
    signature, estflow's falls back to ``predict`` or all predictions)."""
    if isinstance(got, dict) and "serving_default" in got and "error" not in recorded \
            and "serving_default" not in recorded:
        return {k: v for k, v in got.items() if k != "serving_default"}
    return got


def test_exported_signatures_are_2_15s(program, tmp_path):
    recorded = SURFACE["exports"]
    got = program.exports(str(tmp_path))
    assert set(got) == set(recorded)
    assert recorded["predictions=tensor export_outputs=none receiver=raw"][
        "serving_default"]["outputs"] == {"output": "float32"}
    differ = {key: {"2.15": want, "estflow": got[key]} for key, want in recorded.items()
              if without_estflows_fallback_default(want, got[key]) != want}
    assert not differ, differ


def test_premade_estimators_return_and_export_as_2_15(program, tmp_path):
    recorded = SURFACE["canned"]
    got = program.canned(str(tmp_path))
    assert set(got) == set(recorded)
    got = {k: without_estflows_fallback_default(recorded[k], v) if ".export_saved_model" in k
           else v for k, v in got.items()}
    problems = _compare(recorded, got)
    assert not problems, problems

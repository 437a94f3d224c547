"""The compat corpus: real tf.estimator programs, migrated with ``estflow migrate`` and run on
estflow with no hand edit, against the figures the unmodified programs gave on TF 2.15 +
tensorflow-estimator 2.15 (``figures_tf215.json``, recorded by ``record_tf215.py``).

Each program: migrate it into a temporary directory, run it through ``harness.py`` in a
subprocess of this interpreter (seed 0), then compare, for each Estimator the program evaluates,
its *last* ``evaluate()`` result with the 2.15 runs (seeds 0, 1, 2):

- ``global_step``: equal (the same input pipelines and step arguments must train the same number
  of steps);
- metrics in [0, 1] (accuracy, auc, precision, recall, label/mean, prediction/mean, ...): within
  the 2.15 runs' range widened on each side by that range's width, and at least by 0.05 absolute.
  estflow is not bit-identical to tf.estimator (other initial values and shuffles: Keras 3
  initializers, its own variable store), and 2.15 itself spreads widely from seed to seed on
  these small, briefly trained programs (iris test accuracy 0.57-0.93 after the premade
  tutorial's 5000 steps, titanic recall 0.25-0.68 after 100 steps); three seeds underestimate
  that spread, hence the doubling. 0.05 is 1.5 of iris's 30 test rows, 13 of titanic's 264;
- losses and other unbounded metrics: within the 2.15 range widened by its width, and at least
  by 25% of its largest magnitude plus 0.02;
- every metric key 2.15 reported must be reported (estflow may report more).

A program whose estflow run needs an engine feature that is not there yet is
``xfail(strict=True)`` with the feature named: when it lands the test XPASSes and fails, and
the mark is removed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from estflow.pipelines.migrate import migrate_file

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "programs"
FIGURES = json.loads((HERE / "figures_tf215.json").read_text())

BOUNDED = {"accuracy", "accuracy_baseline", "auc", "auc_precision_recall", "precision", "recall",
           "label/mean", "prediction/mean"}
BOUNDED_MARGIN = 0.05
LOSS_MARGIN, LOSS_FLOOR = 0.25, 0.02

# What each failing program needs from the engine (or, named so, from elsewhere).
XFAIL: dict[str, str] = {
    "adtfex_convolutional_network": "tf.compat.v1.layers built twice inside "
    "variable_scope(reuse=True) (train and test graphs sharing weights by scope name): Keras "
    "layers share by object; estflow migrate reports each layer with the replacement",
    "tda_sinemodel_rnn": "TF 1 RNN cells (tf.nn.rnn_cell.GRUCell + tf.nn.dynamic_rnn): Keras 3 "
    "has none; estflow migrate reports each with the tf.keras.layers.RNN/GRUCell replacement",
    "tfet_regression_dnn_pandas": "isinstance filters on TF's private feature-column classes "
    "(tensorflow.python.feature_column.feature_column_v2.NumericColumn...) select none of "
    "estflow's columns; estflow migrate reports the import with estflow's class for each",
    "tflearn_iris_run_config": "DNNClassifier under RunConfig().replace(tf_random_seed=1), 200 "
    "Adagrad steps: estflow learns less than 2.15 at that seed (accuracy 0.87, average_loss "
    "0.26; 2.15: 0.97-1.0, 0.11-0.12), cause open",
    "models_cookbook_custom_regression": "custom model_fn, Adam 0.001, 1000 steps: estflow's "
    "loss 647 (rmse 3.67) against 2.15's 370-508 (rmse 2.78-3.25), just outside; cause open",
}
# Programs that run to the end on estflow but whose figures differ from run to run at the same
# seed (an open defect: estflow is not deterministic there), sometimes outside the 2.15 range:
# the run must succeed; figures outside the range are an xfail naming them, not a pass.
UNSTABLE: dict[str, str] = {
    "cloudml_census_estimator": "TF 1 DNNLinearCombinedClassifier, 100 steps over unscaled "
    "capital_gain: estflow's average_loss differs run to run at seed 0 (0.57, 2.27; 2.15: "
    "0.97-1.28) and its prediction/mean was 0.43 (2.15: 0.495)",
    "nlpest_bow_embeddings": "DNNClassifier over an embedding_column, 200 steps: estflow "
    "learns less and not the same each run (accuracy about 0.5, prediction/mean 0.34 in one "
    "run, inside the range in another; 2.15: accuracy 0.62-0.97, prediction/mean 0.50)",
}
SLOW: set[str] = set()  # programs over ~20 s on 2 cores; none so far


def _params() -> list:
    params = []
    for name in sorted(p.stem for p in PROGRAMS.glob("*.py")):
        marks = []
        if name in XFAIL:
            marks.append(pytest.mark.xfail(strict=True, reason=XFAIL[name]))
        if name in SLOW:
            marks.append(pytest.mark.slow)
        params.append(pytest.param(name, marks=marks, id=name))
    return params


def finals(evaluations: list[dict]) -> list[dict]:
    """Each Estimator's last evaluation, in the order the Estimators were first evaluated."""
    last: dict[int, dict] = {}
    for entry in evaluations:
        last[entry.get("_estimator", 0)] = entry
    return [{k: v for k, v in last[i].items() if k != "_estimator"} for i in sorted(last)]


def run_on_estflow(program: Path, tmp_path: Path, seed: int = 0) -> dict:
    migrated = tmp_path / program.name
    migrate_file(program, migrated)
    out = tmp_path / "result.json"
    env = dict(os.environ, PYTHONHASHSEED=str(seed), TF_CPP_MIN_LOG_LEVEL="2",
               CUDA_VISIBLE_DEVICES="")
    # tf.Transform sets TF_USE_LEGACY_KERAS=1 in this process when any test imports it; the
    # program must see the Keras a user's process gets (Keras 3), not the test runner's.
    env.pop("TF_USE_LEGACY_KERAS", None)
    proc = subprocess.run(
        [sys.executable, str(HERE / "harness.py"), str(migrated), "--framework", "estflow",
         "--seed", str(seed), "--out", str(out)],
        env=env, capture_output=True, text=True, timeout=900)
    if not out.exists():
        raise AssertionError(f"the harness wrote no result:\n{proc.stdout[-3000:]}\n"
                             f"{proc.stderr[-3000:]}")
    return json.loads(out.read_text())


def compare(reference_runs: list[dict], result: dict) -> list[str]:
    """What differs from the 2.15 figures (empty: in tolerance)."""
    problems = []
    references = [finals(r["evaluations"]) for r in reference_runs]
    got = finals(result["evaluations"])
    if any(len(r) != len(got) for r in references):
        return [f"{len(got)} Estimators evaluated, 2.15: {[len(r) for r in references]}"]
    for i, mine in enumerate(got):
        for key in references[0][i]:
            values = [r[i][key] for r in references if key in r[i]]
            if key not in mine:
                problems.append(f"estimator {i}: {key!r} not reported")
                continue
            low, high, value = min(values), max(values), mine[key]
            if key == "global_step":
                margin = 0
            elif key in BOUNDED:
                margin = max(BOUNDED_MARGIN, high - low)
            else:
                margin = max(LOSS_MARGIN * max(abs(low), abs(high)) + LOSS_FLOOR, high - low)
            ok = low - margin <= value <= high + margin
            if not ok:
                problems.append(f"estimator {i}: {key} = {value:.4g}, 2.15: "
                                f"{', '.join(f'{v:.4g}' for v in values)}")
    return problems


@pytest.mark.parametrize("name", _params())
def test_program_runs_after_migrate_and_matches_tf215(name, tmp_path):
    reference = FIGURES["programs"][name]
    assert reference["ok"], f"{name} did not run on TF 2.15 itself"
    result = run_on_estflow(PROGRAMS / f"{name}.py", tmp_path)
    assert result["ok"], f"{name} failed on estflow after `estflow migrate`:\n{result['error']}"
    problems = compare(reference["runs"], result)
    if problems and name in UNSTABLE:
        pytest.xfail(f"{UNSTABLE[name]}; this run: " + "; ".join(problems))
    assert not problems, f"{name}: outside the TF 2.15 figures' tolerance:\n" + "\n".join(problems)


def test_every_program_has_figures():
    names = {p.stem for p in PROGRAMS.glob("*.py")}
    assert names == set(FIGURES["programs"])
    assert set(XFAIL) <= names and set(UNSTABLE) <= names and SLOW <= names
    assert not set(XFAIL) & set(UNSTABLE)
    assert FIGURES["versions"]["tensorflow"].startswith("2.15.")
    assert FIGURES["versions"]["tensorflow-estimator"].startswith("2.15.")


def test_the_codemods_names_are_the_engines():
    """Every estflow name ``estflow migrate`` writes exists in the engine."""
    import estflow.estimator as engine
    from estflow.pipelines import migrate

    for name in migrate.ESTIMATOR_NAMES:
        assert hasattr(engine, name), name
    for name in migrate.EXPORT_NAMES:
        assert hasattr(engine.export, name), name
    for path in migrate.EARLY_STOPPING.values():
        obj = engine
        for part in path.split("."):
            obj = getattr(obj, part)
    for name in migrate.FEATURE_COLUMN_NAMES:
        assert hasattr(engine.feature_column, name), name
    for name in migrate.V1_TRAIN_HOOKS:
        assert hasattr(engine, name), name
    assert engine.model_to_estimator

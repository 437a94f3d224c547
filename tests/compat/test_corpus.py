"""The compat corpus: real tf.estimator programs, migrated with ``estflow migrate`` and run on
estflow with no hand edit, against the figures the unmodified programs gave on TF 2.15 +
tensorflow-estimator 2.15 (``figures_tf215.json``, recorded by ``record_tf215.py``).

Each program: migrate it into a temporary directory, run it through ``harness.py`` in a
subprocess of this interpreter (seed 0; forked from ``fork_server.py``, which has TensorFlow
imported already, as if started afresh), then compare, for each Estimator the program evaluates,
its *last* ``evaluate()`` result with the 2.15 runs (seeds 0, 1, 2):

- ``global_step``: equal (the same input pipelines and step arguments must train the same number
  of steps);
- metrics in [0, 1] (accuracy, auc, precision, recall, a classifier's label/mean and
  prediction/mean, ...; a regressor's means are unbounded, below): within
  the 2.15 runs' range widened on each side by that range's width, and at least by 0.05 absolute.
  estflow is not bit-identical to tf.estimator (other initial values and shuffles: Keras 3
  initializers, its own variable store), and 2.15 itself spreads widely from seed to seed on
  these small, briefly trained programs (iris test accuracy 0.57-0.93 after the premade
  tutorial's 5000 steps, titanic recall 0.25-0.68 after 100 steps); three seeds underestimate
  that spread, hence the doubling. 0.05 is 1.5 of iris's 30 test rows, 13 of titanic's 264;
- losses and other unbounded metrics: within the 2.15 range widened by its width, and at least
  by 25% of its largest magnitude plus 0.02;
- every metric key 2.15 reported must be reported (estflow may report more).

A program whose figures depend on the seed on 2.15 itself more than these margins allow runs at
the three seeds on estflow too, and the ranges must meet (``SEED_SENSITIVE``).

A program whose estflow run needs an engine feature that is not there yet is
``xfail(strict=True)`` with the feature named: when it lands the test XPASSes and fails, and
the mark is removed.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from estflow.pipelines.migrate.codemod import migrate_file

HERE = Path(__file__).resolve().parent
PROGRAMS = HERE / "programs"
FIGURES = json.loads((HERE / "figures_tf215.json").read_text())

BOUNDED = {"accuracy", "accuracy_baseline", "auc", "auc_precision_recall", "precision", "recall",
           "label/mean", "prediction/mean"}
BOUNDED_MARGIN = 0.05
LOSS_MARGIN, LOSS_FLOOR = 0.25, 0.02

# What each failing program needs from the engine (or, named so, from elsewhere).
XFAIL: dict[str, str] = {
    "kfto_keras_model_to_estimator": "Keras 2 constructs around model_to_estimator: a "
    "tf.compat.v1.train optimizer in model.compile (Keras 3 refuses it), "
    "tf.keras.backend.set_learning_phase (gone in Keras 3), and eval_distribute="
    "MirroredStrategy under train_distribute=MultiWorkerMirroredStrategy (the engine evaluates "
    "under the training strategy or on one device); estflow migrate reports each",
    "tflearn_iris_run_config": "DNNClassifier under RunConfig().replace(tf_random_seed=1), 200 "
    "Adagrad steps: the pinned seed makes 2.15's three runs one draw (accuracy 0.97-1.0, "
    "average_loss 0.11-0.12), estflow's is another (0.87, 0.26); at tf_random_seed 2-6 the two "
    "agree (2.15: 0.87-0.93, 0.14-0.23; estflow: 0.83-0.97, 0.12-0.30)",
    "migrate_checkpoint_saver": "DNNClassifier + Adam, 10 steps of numpy_input_fn(shuffle=True, "
    "num_epochs=10) over 640 rows: the input now reads as 2.15's queue did (a random first row, "
    "a 1000-row shuffle across passes, so rows repeat within a draw of 500; on 2.15 the queue "
    "is full, 1000 of 1000, at every step), and estflow's 10-step network spreads wider over "
    "that stream than 2.15's: average_loss 0.29-0.71 over seeds 0-9 (seed 0: 0.71, accuracy "
    "0.96), 2.15 0.38-0.50 over 8 runs (seeds 0-5, seed 0 three times: its first row comes from "
    "Python's unseeded random); with the former per-pass shuffle estflow gave 0.44-0.58 over "
    "seeds 0-4",
    "tda_babyweight_wd": "DNNLinearCombinedRegressor, default Adagrad 0.001 / Ftrl 0.005, 150 "
    "steps over unscaled mother_age and gestation_weeks: a draw of the initial weights. From "
    "2.15's own initial checkpoint estflow trains it to the same average_loss to four decimals "
    "(tests/components/estimator/test_wide_deep_regressor_tf215.py checks the dynamics); over "
    "seeds 0-9 estflow's median is 1.70, 2.15's 1.62, but seed 0 draws a bad start on estflow "
    "(6.17; 2.15 1.49-1.59 at seeds 0-2, too narrow to count as seed-sensitive, though 2.15 too "
    "lands at 2.4 and 4.3 at other seeds)",
}
# Programs whose figures depend on the seed more than the margins above allow, on TF 2.15 itself
# (unscaled inputs into a ReLU tower, 100-200 steps: whether units saturate is down to the
# initial values): one seed of estflow against three of 2.15 is a coin toss there. They run at
# the three seeds on estflow too, and each metric's estflow range must meet the 2.15 range
# widened by the margins above; ``test_seed_sensitive_programs_are`` checks from the figures
# that 2.15 does spread so (no program hides here otherwise).
SEED_SENSITIVE: dict[str, str] = {
    "tda_sinemodel_rnn": "TF 1 GRUCell + dynamic_rnn into a 4-unit ReLU layer, 2.15 loss "
    "0.0011-0.0018 over seeds 0-2 (24% spread in RMSE); at some seeds the ReLU layer dies "
    "(estflow seed 0: RMSE 0.68; seeds 1-5: 0.025-0.048; 2.15 seeds 0-6: 0.027-0.042)",
    "models_cookbook_custom_regression": "custom model_fn, Adam 0.001, 1000 steps on "
    "unscaled inputs: 2.15 loss 370-508 over seeds 0-2 and 888, 662 at seeds 3, 4; estflow "
    "284-1475 over seeds 0-5",
    "cloudml_census_estimator": "TF 1 DNNLinearCombinedClassifier, 100 steps over unscaled "
    "capital_gain (2.15 average_loss 0.97-1.28 over seeds 0-2)",
    "nlpest_bow_embeddings": "DNNClassifier over an embedding_column of padded ids, 200 steps "
    "(2.15 accuracy 0.62-0.97 over seeds 0-2)",
}
# The least spread over 2.15's seeds that makes a program seed-sensitive: a bounded metric's
# range this wide, or an unbounded one's this fraction of its largest magnitude.
SEED_SPREAD_BOUNDED, SEED_SPREAD_RELATIVE = 0.15, 0.2
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


class Forks:
    """``fork_server.py`` processes, one per seed, each started on first use and kept for the
    module: a program forks from the one of its seed (TensorFlow already imported, the seed's
    ``PYTHONHASHSEED`` set at its start) instead of starting an interpreter. A forked run that
    has not finished within ``FORK_TIMEOUT_S`` is killed and the program runs again in a fresh
    interpreter (a fork that hangs costs time, never the verdict)."""

    FORK_TIMEOUT_S = 600

    def __init__(self):
        self.servers: dict[int, subprocess.Popen] = {}

    def run(self, seed: int, argv: list[str], log: Path) -> int | None:
        """The child's exit status, or None when no fork could run it."""
        server = self.servers.get(seed)
        if server is None:
            server = self.servers[seed] = subprocess.Popen(
                [sys.executable, str(HERE / "fork_server.py")], env=_env(seed), text=True,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if server.poll() is not None:
            return None
        server.stdin.write(json.dumps({"argv": argv, "log": str(log)}) + "\n")
        server.stdin.flush()
        started = self._answer(server, 120)
        if started is None:
            return None
        done = self._answer(server, self.FORK_TIMEOUT_S)
        if done is None:
            os.kill(started["pid"], signal.SIGKILL)
            self._answer(server, 60)
            return None
        return done["status"]

    @staticmethod
    def _answer(server: subprocess.Popen, timeout: float) -> dict | None:
        ready, _, _ = select.select([server.stdout], [], [], timeout)
        line = server.stdout.readline() if ready else ""
        return json.loads(line) if line else None

    def close(self) -> None:
        for server in self.servers.values():
            server.stdin.close()
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            server.stdout.close()


@pytest.fixture(scope="module")
def forks():
    servers = Forks()
    yield servers
    servers.close()


def _env(seed: int) -> dict[str, str]:
    env = dict(os.environ, PYTHONHASHSEED=str(seed), TF_CPP_MIN_LOG_LEVEL="2",
               CUDA_VISIBLE_DEVICES="")
    # tf.Transform sets TF_USE_LEGACY_KERAS=1 in this process when any test imports it; the
    # program must see the Keras a user's process gets (Keras 3), not the test runner's.
    env.pop("TF_USE_LEGACY_KERAS", None)
    return env


def run_on_estflow(program: Path, tmp_path: Path, seed: int = 0,
                   forks: Forks | None = None) -> dict:
    tmp_path.mkdir(parents=True, exist_ok=True)
    migrated = tmp_path / program.name
    migrate_file(program, migrated)
    out = tmp_path / "result.json"
    argv = [str(migrated), "--framework", "estflow", "--seed", str(seed), "--out", str(out)]
    log = tmp_path / "harness.log"
    if forks is None or forks.run(seed, argv, log) is None:
        with log.open("w") as output:
            subprocess.run([sys.executable, str(HERE / "harness.py"), *argv], env=_env(seed),
                           stdout=output, stderr=subprocess.STDOUT, timeout=900)
    if not out.exists():
        raise AssertionError(f"the harness wrote no result:\n{log.read_text()[-6000:]}")
    return json.loads(out.read_text())


def _bounded(key: str, values: list[float]) -> bool:
    """A metric in [0, 1]: a regressor's label/mean and prediction/mean are not."""
    return key in BOUNDED and all(0 <= v <= 1 for v in values)


def _margin(key: str, low: float, high: float) -> float:
    if key == "global_step":
        return 0
    if _bounded(key, [low, high]):
        return max(BOUNDED_MARGIN, high - low)
    return max(LOSS_MARGIN * max(abs(low), abs(high)) + LOSS_FLOOR, high - low)


def compare(reference_runs: list[dict], results: list[dict]) -> list[str]:
    """What differs from the 2.15 figures (empty: in tolerance). With one estflow result its
    value must lie in the widened 2.15 range; with several (seed-sensitive programs) their
    range must meet it."""
    problems = []
    references = [finals(r["evaluations"]) for r in reference_runs]
    runs = [finals(r["evaluations"]) for r in results]
    for got in runs:
        if any(len(r) != len(got) for r in references):
            return [f"{len(got)} Estimators evaluated, 2.15: {[len(r) for r in references]}"]
    for i in range(len(runs[0])):
        for key in references[0][i]:
            values = [r[i][key] for r in references if key in r[i]]
            if any(key not in got[i] for got in runs):
                problems.append(f"estimator {i}: {key!r} not reported")
                continue
            mine = [got[i][key] for got in runs]
            low, high = min(values), max(values)
            margin = _margin(key, low, high)
            if max(mine) < low - margin or min(mine) > high + margin:
                shown = ", ".join(f"{v:.4g}" for v in mine)
                problems.append(f"estimator {i}: {key} = {shown}, 2.15: "
                                f"{', '.join(f'{v:.4g}' for v in values)}")
    return problems


def spread(reference_runs: list[dict]) -> list[str]:
    """The metrics 2.15's own runs spread more than a seed-sensitive program's bound."""
    references = [finals(r["evaluations"]) for r in reference_runs]
    wide = []
    for i, first in enumerate(references[0]):
        for key in first:
            values = [r[i][key] for r in references if key in r[i]]
            width = max(values) - min(values)
            bounded = _bounded(key, values)
            if bounded and width >= SEED_SPREAD_BOUNDED or not bounded and \
                    width >= SEED_SPREAD_RELATIVE * max(abs(v) for v in values) > 0:
                wide.append(f"{key} {min(values):.3g}-{max(values):.3g}")
    return wide


@pytest.mark.parametrize("name", _params())
def test_program_runs_after_migrate_and_matches_tf215(name, tmp_path, forks):
    reference = FIGURES["programs"][name]
    assert reference["ok"], f"{name} did not run on TF 2.15 itself"
    seeds = (0, 1, 2) if name in SEED_SENSITIVE else (0,)
    results = []
    for seed in seeds:
        result = run_on_estflow(PROGRAMS / f"{name}.py", tmp_path / f"seed{seed}", seed, forks)
        assert result["ok"], (f"{name} failed on estflow after `estflow migrate` (seed {seed}):"
                              f"\n{result['error']}")
        results.append(result)
    problems = compare(reference["runs"], results)
    assert not problems, f"{name}: outside the TF 2.15 figures' tolerance:\n" + "\n".join(problems)


@pytest.mark.parametrize("name", sorted(SEED_SENSITIVE))
def test_seed_sensitive_programs_are(name):
    """A program is compared seed range to seed range only where 2.15 itself spreads widely."""
    assert spread(FIGURES["programs"][name]["runs"]), (
        f"{name}: 2.15's figures over seeds 0-2 spread less than the seed-sensitive bounds")


def test_every_program_has_figures():
    names = {p.stem for p in PROGRAMS.glob("*.py")}
    assert names == set(FIGURES["programs"])
    assert set(XFAIL) <= names and set(SEED_SENSITIVE) <= names and SLOW <= names
    assert not set(XFAIL) & set(SEED_SENSITIVE)
    assert FIGURES["versions"]["tensorflow"].startswith("2.15.")
    assert FIGURES["versions"]["tensorflow-estimator"].startswith("2.15.")


def test_the_codemods_names_are_the_engines():
    """Every estflow name ``estflow migrate`` writes exists in the engine."""
    import estflow.estimator as engine
    from estflow.pipelines.migrate import codemod as migrate

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

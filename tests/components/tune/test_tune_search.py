"""The tune step's search (estflow.components.tune.step) with a trial runner that needs no
TensorFlow (``_fake.FakeTrials``: a trial's value is a fixed function of its values): which
trial is best and what is written; failures counted, ``max_failures`` and a search with no
completed trial; a larger budget and a search killed with SIGKILL continuing the same study;
the grid, conditional dimensions, tuple choices, seeds, timeout, parallel trials, pruning;
bad inputs. The real trials (the train and evaluate steps) are in test_tune_trials.py.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from xml.etree import ElementTree

import pytest
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

import estflow.dsl as ef
from estflow.components.tune import __main__ as tune_main
from estflow.components.tune import space as tune_space
from estflow.components.tune import study as tune_study
from estflow.components.tune.step import TuneError
from estflow.components.tune.step import run
from estflow.components.tune.trial import Outcome
from estflow.components.tune.trial import SearchError
from estflow.components.tune.trial import _error_of
from estflow.components.tune.trial import thread_env
from estflow.components.tune.trial import trial_pipeline
from estflow.dsl.contracts import TUNE_STUDY_ENV
from tests.components import _train_fixtures as fx
from tests.components.tune._fake import STUDY_KEY
from tests.components.tune._fake import FakeTrials
from tests.components.tune._fake import calls
from tests.components.tune._fake import score

ROOT = Path(__file__).resolve().parents[3]
SPACE = {"model.hidden_units": ef.Choice(((8, 4), (4,), (16, 8))),
         "model.learning_rate": ef.FloatRange(0.005, 0.5, log=True),
         "train.batch_size": ef.IntRange(8, 32, step=8)}


def _pipeline(space=None, objective="auc", **tune) -> ef.Pipeline:
    return fx.pipeline(tune=ef.Tune(SPACE if space is None else space, objective, **tune))


def _search(tmp_path: Path, pipeline: ef.Pipeline, runner, out: str = "hp", **kw):
    lines: list[str] = []
    kw.setdefault("study_key", STUDY_KEY)
    result = run(pipeline, tmp_path / "examples", tmp_path / "transformed", tmp_path / out,
                 lines.append, study_dir=tmp_path / "cache", trial_runner=runner, **kw)
    return result, lines


def _record(out: Path) -> dict:
    return json.loads((out / "trials.json").read_text())


def _trials(out: Path) -> list[dict]:
    return _record(out)["trials"]


# --- the best trial and the outputs --------------------------------------------------------

def test_best_json_is_the_best_completed_trial_and_every_output_is_written(tmp_path):
    pipeline = _pipeline(trials=8, algorithm="random", seed=3)
    runner = FakeTrials(tmp_path / "calls.jsonl")
    best, lines = _search(tmp_path, pipeline, runner)
    out = tmp_path / "hp"
    rows = _trials(out)
    assert [r["number"] for r in rows] == list(range(8))
    assert all(r["state"] == "COMPLETE" for r in rows)
    for r in rows:  # each value is its assignment's, read back as declared (JSON lists)
        assert r["value"] == pytest.approx(score(r["assignment"]))
        assert set(r["assignment"]) == set(SPACE)
        assert r["assignment"]["model.hidden_units"] in ([8, 4], [4], [16, 8])
        assert r["started"] and r["finished"] and r["duration_s"] >= 0
        assert r["metrics"] == {"auc": r["value"], "examples": 48}
    top = max(rows, key=lambda r: (r["value"], -r["number"]))
    assert json.loads((out / "best.json").read_text()) == best
    assert best["trial"] == top["number"] and best["value"] == top["value"]
    assert best["assignment"] == top["assignment"] and best["objective"] == "auc"
    assert best["higher_is_better"] is True
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["metrics"] == {"auc": top["value"]} and metrics["best_trial"] == top["number"]
    assert (metrics["complete"], metrics["pruned"], metrics["failed"]) == (8, 0, 0)
    page = (out / "report.html").read_text()
    assert page.count("<svg") == 1 + len(SPACE)  # by trial, then against each dimension
    assert page.count("<tr class=") == 8
    for svg in re.findall(r"<svg.*?</svg>", page, flags=re.S):
        ElementTree.fromstring(svg)  # well-formed
    assert page.count("<circle") == 8 * (1 + len(SPACE))
    # one line as each trial starts (with its values) and ends (with its value); the best last
    assert sum(" started: {" in line for line in lines) == 8
    assert sum(" finished: auc=" in line for line in lines) == 8
    assert any(line.startswith(f"best trial {top['number']}: auc={top['value']:.4f} {{")
               for line in lines)
    # the runner got the pipeline each trial trains: the values applied
    for trial in runner.runs:
        assert trial.pipeline.model.hidden_units == trial.assignment["model.hidden_units"]
        assert trial.pipeline.train.batch_size == trial.assignment["train.batch_size"]
        assert trial.pipeline.tune is None and trial.pipeline.push is None


def test_lower_is_better_objective_picks_the_least(tmp_path):
    pipeline = _pipeline(objective="average_loss", trials=5, algorithm="random")
    best, _ = _search(tmp_path, pipeline, FakeTrials())
    values = [r["value"] for r in _trials(tmp_path / "hp")]
    assert best["value"] == min(values) and best["higher_is_better"] is False


def test_the_same_seed_draws_the_same_trials(tmp_path):
    def drawn(seed, where):
        _search(tmp_path, _pipeline(trials=6, seed=seed), FakeTrials(), out=where,
                study_key=where)
        return [r["assignment"] for r in _trials(tmp_path / where)]

    assert drawn(1, "a") == drawn(1, "b")
    assert drawn(1, "a") != drawn(2, "c")


# --- failures ------------------------------------------------------------------------------

def test_a_failing_trial_is_recorded_and_the_search_goes_on(tmp_path):
    def fails(assignment):
        return assignment["model.hidden_units"] == (4,)

    pipeline = _pipeline(trials=10, algorithm="random", max_failures=20, seed=5)
    best, lines = _search(tmp_path, pipeline, FakeTrials(fails=fails))
    rows = _trials(tmp_path / "hp")
    failed = [r for r in rows if r["state"] == "FAIL"]
    assert failed, "the seed should draw (4,) at least once"
    assert len(rows) == 10  # a failure uses the budget
    for r in failed:
        assert r["assignment"]["model.hidden_units"] == [4] and r["value"] is None
        assert r["error"].startswith("RuntimeError: bad values")
        assert f"trial {r['number']} failed: RuntimeError: bad values" in "\n".join(lines)
    assert best["assignment"]["model.hidden_units"] != [4]
    metrics = json.loads((tmp_path / "hp" / "metrics.json").read_text())
    assert metrics["failed"] == len(failed)
    page = (tmp_path / "hp" / "report.html").read_text()
    svgs = re.findall(r"<svg.*?</svg>", page, flags=re.S)
    for svg in svgs:
        ElementTree.fromstring(svg)
    assert svgs[0].count("\u00d7<title>") == len(failed)  # a cross per failed trial


def test_max_failures_stops_the_search_with_the_count_and_the_last_error(tmp_path):
    runner = FakeTrials(fails=lambda a: True)
    with pytest.raises(TuneError) as caught:
        _search(tmp_path, _pipeline(trials=10, max_failures=2), runner)
    message = str(caught.value)  # two may fail: the third gives up (as Katib's Experiment)
    assert "3 trial(s) failed" in message and "max_failures=2" in message
    assert "the last error: trial 2: RuntimeError: bad values" in message
    assert len(runner.runs) == 3
    assert [r["state"] for r in _trials(tmp_path / "hp")] == ["FAIL", "FAIL", "FAIL"]
    assert not (tmp_path / "hp" / "best.json").exists()


def test_no_completed_trial_is_a_clear_error(tmp_path):
    with pytest.raises(TuneError, match=r"no trial completed \(3 failed\); the last error: "
                                        r"trial 2: RuntimeError: bad values"):
        _search(tmp_path, _pipeline(trials=3, max_failures=5), FakeTrials(fails=lambda a: True))


def test_max_failures_stops_the_trials_still_running_as_interrupted(tmp_path):
    """Two at once; one fails (max_failures=0) while the other runs: that one is stopped, and
    a rerun trains its values again."""
    def fails(assignment):
        return assignment["model.hidden_units"] == (4,)

    space = {"model.hidden_units": ef.Choice(((4,), (8, 4)))}
    pipeline = _pipeline(space, trials=2, parallel=2, algorithm="grid", max_failures=0)

    started = time.monotonic()
    with pytest.raises(TuneError, match="1 trial.s. failed"):  # the other: until cancelled
        _search(tmp_path, pipeline, FakeTrials(fails=fails,
                                               delay=lambda a: 0.3 if fails(a) else 30))
    assert time.monotonic() - started < 20
    rows = {r["assignment"]["model.hidden_units"][0]: r for r in _trials(tmp_path / "hp")}
    assert rows[4]["state"] == "FAIL" and not rows[4]["interrupted"]
    assert rows[8]["state"] == "FAIL" and rows[8]["interrupted"]
    assert rows[8]["error"].startswith("interrupted")


def test_a_search_error_stops_the_search_at_once(tmp_path):
    class Broken(FakeTrials):
        def __call__(self, trial):
            raise SearchError("early stopping compares the trials' auc_exact while they train")

    with pytest.raises(TuneError, match="auc_exact while they train"):
        _search(tmp_path, _pipeline(trials=5), Broken())


# --- continuing a study --------------------------------------------------------------------

def test_a_larger_budget_reuses_the_finished_trials(tmp_path):
    log = tmp_path / "calls.jsonl"
    _search(tmp_path, _pipeline(trials=3), FakeTrials(log))
    first = _trials(tmp_path / "hp")
    assert [c["number"] for c in calls(log)] == [0, 1, 2]
    _, lines = _search(tmp_path, _pipeline(trials=5, parallel=2, max_failures=9),
                       FakeTrials(log), out="hp2")
    assert sorted(c["number"] for c in calls(log)[3:]) == [3, 4]  # two at once
    assert lines[0].startswith("reusing 3 finished trial(s) of this search (3 complete)")
    again = _trials(tmp_path / "hp2")
    assert again[:3] == first and len(again) == 5
    # the same budget again: nothing trains
    _search(tmp_path, _pipeline(trials=5), FakeTrials(log), out="hp3")
    assert len(calls(log)) == 5
    assert _trials(tmp_path / "hp3") == again


def test_the_study_key_leaves_out_the_budget_only():
    base = _pipeline(trials=5)
    key = tune_study.study_key(base, "data")
    for budget in (dict(trials=9), dict(parallel=2), dict(timeout_s=60.0),
                   dict(max_failures=7)):
        assert tune_study.study_key(_pipeline(**{"trials": 5, **budget}), "data") == key
    assert tune_study.study_key(base, "other data") != key
    for change in (dict(seed=1), dict(algorithm="random"), dict(objective="accuracy"),
                   dict(trial_steps=10), dict(early_stopping=ef.MedianStop(10)),
                   dict(space={"model.learning_rate": ef.FloatRange(0.01, 0.1)})):
        assert tune_study.study_key(_pipeline(**{"trials": 5, **change}), "data") != key
    other_model = dataclasses.replace(base, train=ef.TrainSpec(max_steps=61, batch_size=16))
    assert tune_study.study_key(other_model, "data") != key


def test_a_search_killed_with_sigkill_continues_where_it_stopped(tmp_path):
    """The step's process is killed (SIGKILL) while trial 1 runs; started again, it keeps
    trial 0, trains trial 1's values again (as a new trial) and then the rest."""
    spec = tmp_path / "spec.json"
    spec.write_text(_pipeline(trials=3, algorithm="random").to_json())
    log = tmp_path / "calls.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.components.tune._fake", str(spec), str(tmp_path / "hp"),
         str(tmp_path / "cache"), str(log), "2.0"], cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while len(calls(log)) < 2:  # trial 0 done (2 s), trial 1 running
        assert process.poll() is None, process.stdout.read()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.3)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    process.stdout.close()
    before = _trials(tmp_path / "hp")
    assert [(r["number"], r["state"]) for r in before] == [(0, "COMPLETE")]
    killed = calls(log)[1]
    _, lines = _search(tmp_path, _pipeline(trials=3, algorithm="random"), FakeTrials(log),
                       out="hp2")
    assert "trial 1 was interrupted (its search stopped while it ran): trial 2 trains its " \
           "values again" in lines
    assert "reusing 1 finished trial(s)" in lines[1]
    rows = _trials(tmp_path / "hp2")
    assert [(r["number"], r["state"]) for r in rows] == [
        (0, "COMPLETE"), (1, "FAIL"), (2, "COMPLETE"), (3, "COMPLETE")]
    assert rows[0] == before[0]  # not trained again
    assert rows[1]["interrupted"] and rows[1]["retried_as"] == 2
    assert rows[2]["retry_of"] == 1 and rows[2]["assignment"] == killed["assignment"]
    assert [c["number"] for c in calls(log)] == [0, 1, 2, 3]  # trial 0 ran once


def test_a_journal_line_cut_by_a_kill_is_dropped(tmp_path):
    folder = tmp_path / "cache" / STUDY_KEY
    _search(tmp_path, _pipeline(trials=2), FakeTrials())
    journal = folder / "journal.log"
    with open(journal, "ab") as f:
        f.write(b'{"op_code": 5, "worker_id": "x", "trial_id": 0, "par')  # killed mid-line
    _search(tmp_path, _pipeline(trials=3), FakeTrials(), out="hp2")
    assert [r["state"] for r in _trials(tmp_path / "hp2")] == ["COMPLETE"] * 3


# --- the space -----------------------------------------------------------------------------

def test_a_grid_trains_each_point_once_conditional_dimensions_only_where_active(tmp_path):
    space = {"model.optimizer": ef.Choice(("Adagrad", "Adam")),
             "model.learning_rate": ef.Choice((0.01, 0.1), when=("model.optimizer", "Adam")),
             "model.hidden_units": ef.Choice(((8, 4), (4,)))}
    pipeline = _pipeline(space, trials=6, algorithm="grid", parallel=2)
    runner = FakeTrials()
    _search(tmp_path, pipeline, runner)
    points = [r["assignment"] for r in _trials(tmp_path / "hp")]
    expected = [tune_space.key_of(p) for p in pipeline.tune.grid()]
    assert sorted(tune_space.key_of(p) for p in points) == sorted(expected)
    for trial in runner.runs:
        assert ("model.learning_rate" in trial.assignment) == \
            (trial.assignment["model.optimizer"] == "Adam")
        assert trial.pipeline.model.optimizer == trial.assignment["model.optimizer"]
        assert isinstance(trial.assignment["model.hidden_units"], tuple)


def test_choices_of_every_kind_go_to_optuna_and_back(tmp_path):
    space = {"model.dropout": ef.Choice((None, 0.1, 0.3)),
             "model.batch_norm": ef.Choice((False, True)),
             "model.hidden_units": ef.Choice(((8, 4), (4,))),
             "model.activation": ef.Choice(("relu", "tanh")),
             "train.batch_size": ef.Choice((8, 16))}
    pipeline = _pipeline(space, trials=8, algorithm="random")
    runner = FakeTrials()
    _search(tmp_path, pipeline, runner)
    tune = pipeline.tune
    for trial in runner.runs:
        for path, value in trial.assignment.items():
            assert tune.dimension(path).contains(value)
        params = tune_space.encoded(tune, trial.assignment)
        assert tune_space.decoded(tune, params) == trial.assignment
        assert trial.pipeline.model.dropout == trial.assignment["model.dropout"]
        assert trial.pipeline.model.batch_norm is trial.assignment["model.batch_norm"]


def test_trial_pipeline_trains_locally_for_trial_steps_and_evaluates_every_every_steps():
    pipeline = fx.pipeline(
        run_config=ef.RunConfig(save_checkpoints_steps=1000, steps_per_loop=50),
        tune=ef.Tune(SPACE, "auc", trial_steps=40,
                     early_stopping=ef.MedianStop(every_steps=20, warmup_trials=1)))
    assignment = {"model.hidden_units": (4,), "model.learning_rate": 0.01,
                  "train.batch_size": 8}
    trial = trial_pipeline(pipeline, pipeline.tune, assignment)
    assert trial.train.max_steps == 40 and trial.train.batch_size == 8
    assert trial.model.hidden_units == (4,) and trial.model.learning_rate == 0.01
    assert trial.run_config.save_checkpoints_steps == 20
    assert trial.run_config.steps_per_loop == 10  # divides 20
    assert (trial.eval.start_delay_secs, trial.eval.throttle_secs) == (0, 0)
    assert trial.tune is None and trial.push is None and trial.resources == {}
    plain = trial_pipeline(pipeline, dataclasses.replace(pipeline.tune, early_stopping=None,
                                                         trial_steps=None), assignment)
    assert plain.train.max_steps == pipeline.train.max_steps
    assert plain.run_config.save_checkpoints_steps == 1000


def test_each_trial_process_gets_its_share_of_the_cpus():
    assert thread_env({"A": "1"}, parallel=2, cpus=8) == {
        "A": "1", "TF_NUM_INTRAOP_THREADS": "4", "TF_NUM_INTEROP_THREADS": "4"}
    assert thread_env({}, parallel=4, cpus=2)["TF_NUM_INTRAOP_THREADS"] == "1"


# --- how trials run ------------------------------------------------------------------------

def test_parallel_trials_run_at_once(tmp_path):
    running, most = 0, 0
    lock = threading.Lock()

    class Counting(FakeTrials):
        def __call__(self, trial):
            nonlocal running, most
            with lock:
                running += 1
                most = max(most, running)
            try:
                return super().__call__(trial)
            finally:
                with lock:
                    running -= 1

    _search(tmp_path, _pipeline(trials=6, parallel=3), Counting(delay=0.4))
    assert most == 3
    assert len(_trials(tmp_path / "hp")) == 6


def test_timeout_starts_no_new_trial(tmp_path):
    runner = FakeTrials(delay=0.4)
    _, lines = _search(tmp_path, _pipeline(trials=20, timeout_s=0.9), runner)
    assert 2 <= len(runner.runs) <= 4
    assert "timeout_s=0.9 reached: no new trial starts" in lines
    assert len(_trials(tmp_path / "hp")) == len(runner.runs)


def test_median_stop_prunes_a_trial_behind_the_others(tmp_path):
    space = {"model.learning_rate": ef.Choice((0.05, 0.04, 0.0001))}
    seed = next(s for s in range(100) if list(tune_space.grid_order(
        ef.Tune(space, "auc", algorithm="grid", trials=3, seed=s)))[-1]
        == {"model.learning_rate": 0.0001})

    def curve(assignment, step):  # the bad one stays at 0.5
        return 0.5 if assignment["model.learning_rate"] < 0.001 else 0.6 + step / 100

    pipeline = _pipeline(space, trials=3, algorithm="grid", seed=seed,
                         early_stopping=ef.MedianStop(every_steps=10, warmup_trials=1))
    _, lines = _search(tmp_path, pipeline, FakeTrials(curve=curve))
    rows = _trials(tmp_path / "hp")
    assert [r["state"] for r in rows] == ["COMPLETE", "COMPLETE", "PRUNED"]
    pruned = rows[2]
    assert pruned["assignment"] == {"model.learning_rate": 0.0001}
    assert pruned["intermediate"] == [{"step": 10, "value": 0.5}] and pruned["value"] == 0.5
    assert rows[0]["intermediate"] == [{"step": s, "value": pytest.approx(0.6 + s / 100)}
                                       for s in (10, 20, 30)]
    assert "trial 2 pruned at step 10: auc=0.5000" in "\n".join(lines)
    page = (tmp_path / "hp" / "report.html").read_text()
    assert "while training" in page and "stopped at step 10" in page


def _halving_reference(curves: list[list[float]], steps: list[int], min_steps: int,
                       factor: int) -> list[int | None]:
    """Asynchronous successive halving, written from its definition (ASHA, Li et al. 2020)
    for trials run one after another: at rung k (``min_steps * factor**k`` steps) a trial
    goes on only if its value is among the best ``max(1, n // factor)`` of the ``n`` trials
    that reached rung k so far, itself included. The step each trial is stopped at (None:
    it finished)."""
    reached: dict[int, list[float]] = {}
    stopped: list[int | None] = []
    for curve in curves:
        at = None
        for step, value in zip(steps, curve, strict=True):
            rung = 0
            while min_steps * factor ** rung < step:
                rung += 1
            if min_steps * factor ** rung != step:
                continue  # not a rung: reported, not judged
            values = reached.setdefault(rung, [])
            values.append(value)
            best = sorted(values, reverse=True)[:max(1, len(values) // factor)]
            if value < best[-1]:
                at = step
                break
        stopped.append(at)
    return stopped


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), factor=st.sampled_from((2, 3)), count=st.integers(2, 7))
def test_halving_stop_stops_the_trials_successive_halving_stops(tmp_path, data, factor,
                                                                 count):
    """Generated learning curves, trials one at a time: the trials HalvingStop stops, and
    the step each stops at, are the reference's (:func:`_halving_reference`)."""
    steps = [10 * i for i in range(1, 9)]
    curves = [data.draw(st.lists(st.floats(0.0, 1.0), min_size=8, max_size=8), label=f"c{i}")
              for i in range(count)]
    rates = tuple(round(0.001 * (i + 1), 3) for i in range(count))
    pipeline = _pipeline({"model.learning_rate": ef.Choice(rates)}, trials=count,
                         algorithm="grid", early_stopping=ef.HalvingStop(10, factor=factor))
    runner = FakeTrials(curve=lambda a, step: curves[rates.index(a["model.learning_rate"])]
                        [steps.index(step)], steps=tuple(steps))
    with tempfile.TemporaryDirectory(dir=tmp_path) as folder:
        _search(Path(folder), pipeline, runner)
        rows = _trials(Path(folder) / "hp")
    order = [rates.index(r["assignment"]["model.learning_rate"]) for r in rows]
    expected = _halving_reference([curves[i] for i in order], steps, 10, factor)
    got = [r["intermediate"][-1]["step"] if r["state"] == "PRUNED" else None for r in rows]
    assert got == expected, (order, [curves[i] for i in order])
    assert [r["state"] for r in rows] == ["COMPLETE" if e is None else "PRUNED"
                                          for e in expected]


# --- bad inputs ----------------------------------------------------------------------------

def test_a_spec_without_a_search_is_refused(tmp_path):
    with pytest.raises(TuneError, match="declares no search"):
        run(fx.pipeline(), tmp_path, tmp_path, tmp_path / "hp", lambda _: None)


def test_missing_inputs_are_named_before_any_trial(tmp_path):
    (tmp_path / "transformed").mkdir()
    with pytest.raises(TuneError) as caught:
        run(_pipeline(trials=2), tmp_path / "examples", tmp_path / "transformed",
            tmp_path / "hp", lambda _: None, study_key="k")
    message = str(caught.value)
    for missing in ("transform_fn", "transform.json", "train/*.tfrecord.gz",
                    "eval/*.tfrecord.gz", "examples/eval/ (the raw eval split)"):
        assert missing in message
    assert not (tmp_path / "hp" / "study").exists()


def test_the_command_line_says_what_is_wrong(tmp_path, capsys):
    spec = tmp_path / "spec.json"
    spec.write_text(_pipeline(trials=2).to_json())
    code = tune_main.main(["--spec", str(spec), "--examples", str(tmp_path / "ex"),
                           "--transformed", str(tmp_path / "tr"),
                           "--hyperparameters", str(tmp_path / "hp")])
    assert code == 1
    assert "[tune] error: the search needs the transform step's output" in capsys.readouterr().err


def test_the_command_line_keeps_the_study_where_the_runner_says(tmp_path, monkeypatch):
    spec = tmp_path / "spec.json"
    spec.write_text(_pipeline(trials=2).to_json())
    seen = {}
    monkeypatch.setattr(tune_main, "run", lambda *args, **kw: seen.update(kw))
    argv = ["--spec", str(spec), "--examples", "ex", "--transformed", "tr",
            "--hyperparameters", "hp"]
    monkeypatch.delenv(TUNE_STUDY_ENV, raising=False)
    assert tune_main.main(argv) == 0
    assert seen["study_dir"] is None and seen["study_key"] is None  # the output's study/
    assert seen["keep_models"] is False and seen["env"] == dict(os.environ)
    monkeypatch.setenv(TUNE_STUDY_ENV, str(tmp_path / "studies"))
    assert tune_main.main(argv) == 0
    assert seen["study_dir"] == str(tmp_path / "studies")
    assert tune_main.main([*argv, "--study-dir", "mine", "--study-key", "k",
                           "--keep-models"]) == 0
    assert (seen["study_dir"], seen["study_key"], seen["keep_models"]) == ("mine", "k", True)


def test_the_runner_gets_a_fresh_folder_per_trial(tmp_path):
    seen = []

    def runner(trial):
        assert not trial.folder.exists()
        trial.folder.mkdir(parents=True)
        seen.append(trial.folder)
        return Outcome(score(trial.assignment), {"auc": score(trial.assignment)})

    _search(tmp_path, _pipeline(trials=3), runner)
    assert len(set(seen)) == 3
    assert all(f.parent == tmp_path / "cache" / STUDY_KEY / "trials" for f in seen)


def test_a_second_search_of_the_same_study_waits_for_the_first(tmp_path):
    folder = tmp_path / "cache" / STUDY_KEY
    lines: list[str] = []
    with tune_study.search_lock(folder, lines.append):
        thread = threading.Thread(target=lambda: run(
            _pipeline(trials=2), tmp_path, tmp_path, tmp_path / "hp", lines.append,
            study_dir=tmp_path / "cache", study_key=STUDY_KEY, trial_runner=FakeTrials()))
        thread.start()
        deadline = time.monotonic() + 10
        while not lines:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert lines[0].startswith("another search of this study is running")
        assert not (tmp_path / "hp" / "trials.json").exists()
    thread.join(30)
    assert len(_trials(tmp_path / "hp")) == 2


@pytest.mark.parametrize("log, said", [
    ("[train    1.0s] training from global step 0 to 60\n"
     "[train] error: NaN loss during training at step 20\n", "NaN loss during training at step 20"),
    ("Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
     "estflow.estimator.NanLossError: NaN loss\n", "estflow.estimator.NanLossError: NaN loss"),
    ("I0000 some TensorFlow log\n", "the train step ended with exit status 1"),
])
def test_a_failed_steps_error_is_one_line_from_its_log(tmp_path, log, said):
    (tmp_path / "train.log").write_text(log)
    assert _error_of(tmp_path / "train.log", "train", 1).startswith(said)

"""What ``estflow run`` says after a failure leads somewhere (issue 32, item 7).

``--resume`` continues a run as it was declared (its ``pipeline.json``), so it helps only when
the cause was outside the pipeline file. A failure the file caused (every row rejected by the
type it declares, a traceback through its code) ends with the command that starts a new run,
which reuses every step whose inputs did not change; ``--resume`` after the file changed is
refused, naming the fields. The ingest test runs the real ingest step on a generated CSV (no
TensorFlow); the others run fake steps (:mod:`tests.pipelines.fake_runs`) behind the real
fingerprint step, runner, cache and records.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import random
import signal
import traceback
from pathlib import Path

import pytest

from estflow.pipelines import cli
from estflow.pipelines.examples import taxi
from estflow.pipelines.local import runs
from estflow.pipelines.local import stopping as _stopping
from estflow.pipelines.local.stopping import StepFailed
from tests.pipelines import fake_runs

REPO = Path(__file__).resolve().parents[2]
TAXI_DATA = Path(taxi.__file__).parent / "data" / "chicago_taxi" / "data.csv"

PENGUINS = '''import estflow.dsl as ef

pipeline = ef.Pipeline(
    name="penguins",
    source=ef.CsvSource("penguins.csv"),
    features=(ef.Numeric("bill_length_mm", default=0.0),
              ef.Numeric("flipper_length_mm", default=0.0)),
    label={label},
    model=ef.LinearClassifier(feature_columns=("bill_length_mm", "flipper_length_mm"),
                              n_classes=3),
    train=ef.TrainSpec(max_steps=20, batch_size=32),
    push=ef.PushTarget("serving", "penguins"),
)
'''
INT_LABEL = 'ef.Label("species")'  # dtype="int": class ids, over class names
STRING_LABEL = 'ef.Label("species", dtype="string", vocabulary=("Adelie", "Chinstrap", "Gentoo"))'


@pytest.fixture(autouse=True)
def _steps_import_the_tests(monkeypatch):
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(REPO) + (os.pathsep + path if path else ""))


def _penguins(folder: Path) -> Path:
    """344 rows of penguins whose species is a name, and a pipeline declaring it an int."""
    rng = random.Random(344)
    lines = ["bill_length_mm,flipper_length_mm,species"] + [
        f"{rng.uniform(32, 60):.1f},{rng.randint(172, 231)},"
        f"{rng.choice(('Adelie', 'Chinstrap', 'Gentoo'))}" for _ in range(344)]
    (folder / "penguins.csv").write_text("\n".join(lines) + "\n")
    target = folder / "penguins.py"
    target.write_text(PENGUINS.format(label=INT_LABEL))
    return target


def _last_line(text: str) -> str:
    return text.rstrip("\n").splitlines()[-1]


def test_every_row_rejected_shows_the_first_reasons_and_leads_to_a_new_run(
        tmp_path, monkeypatch, capsys):
    target = _penguins(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "penguins.py"]) == 4  # the real ingest step
    out, err = capsys.readouterr()
    said = out + err
    # the first rejected rows, file:line: reason, and the count by reason, on the terminal
    first = next(line for line in (tmp_path / "penguins.csv").read_text().splitlines()[1:])
    assert (f"penguins.csv:2: column 'species': expected an integer, got "
            f"{first.rsplit(',', 1)[1]!r}") in said
    assert "first rejected rows (5 of 344)" in said
    assert "bad_value:species: 344" in said
    assert "no row was kept, so the declaration most likely does not fit the data (every row " \
           "breaks the type declared for 'species')" in said
    # the rejected rows' file is named in the run's directory, not the cache's partial one
    (run,) = (runs.home() / "penguins").iterdir()
    assert f"{run / 'ingest' / 'examples' / 'rejected.jsonl'}" in said
    assert ".partial" not in said
    # the way on: fix the file, start a new run; never --resume (it reruns the declaration)
    assert _last_line(err) == ("estflow run: after fixing the pipeline file (or the data), "
                               "start a new run (steps whose inputs did not change are reused "
                               "from the cache): estflow run penguins.py")
    assert "--resume" not in said

    # the file fixed, --resume RUN would run the old declaration again: refused, saying so
    target.write_text(PENGUINS.format(label=STRING_LABEL))
    assert cli.main(["run", "penguins.py", "--resume", run.name]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert (f"the pipeline changed since run {run.name} (label.dtype, label.vocabulary): "
            "--resume continues a run as it was declared") in err
    assert _last_line(err).endswith("for the changes, start a new run (steps whose inputs did "
                                    "not change are reused from the cache): estflow run "
                                    "penguins.py")
    assert runs.find_run(run.name).data["attempts"][-1]["status"] == "failed"  # untouched


def test_every_row_rejected_fails_ingest_even_where_the_source_allows_it(tmp_path):
    from estflow.components.ingest import step as ingest  # noqa: PLC0415
    from estflow.pipelines import loader  # noqa: PLC0415

    target = _penguins(tmp_path)
    target.write_text(target.read_text().replace(
        'ef.CsvSource("penguins.csv")', 'ef.CsvSource("penguins.csv", max_rejected_fraction=1.0)'))
    pipeline = loader.load(str(target)).pipeline
    with pytest.raises(ingest.IngestError) as failed:
        ingest.run(pipeline, tmp_path / "examples", source_root=str(tmp_path))
    message = str(failed.value)
    assert "every one of the 344 rows read was rejected: nothing to train on" in message
    assert ": column 'species': expected an integer, got '" in message


# --- failures in the pipeline's code, and outside it (fake steps) ----------------------------

CODE = '''import dataclasses
import estflow.dsl as ef
from estflow.pipelines.examples import taxi


def big_tipper(columns):
    return {{"big_tipper": columns["{column}"] > 0.2 * columns["fare"]}}


pipeline = dataclasses.replace(
    taxi.pipeline, source=ef.CsvSource({data!r}),
    derive=ef.Derive(big_tipper, outputs=(ef.Column("big_tipper", "int"),)))
'''


def _taxi(folder: Path, column: str = "tips") -> Path:
    data = folder / "data.csv"
    if not data.exists():
        with open(TAXI_DATA) as src, open(data, "w") as dst:
            dst.writelines(itertools.islice(src, 51))
    target = folder / "p.py"
    target.write_text(CODE.format(column=column, data=str(data)))
    return target


def _traceback_of(target: Path) -> str:
    """The traceback the pipeline's derive function raises (a typo in a column's name), as a
    step's log has it."""
    spec = importlib.util.spec_from_file_location("user_pipeline", target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        module.big_tipper({"tips": 1.0, "fare": 2.0})
    except KeyError:
        return traceback.format_exc()
    raise AssertionError("the derive function did not fail")


def _statuses(record: runs.RunRecord) -> dict[str, str]:
    return {name: step["status"] for name, step in record.data["steps"].items()}


def test_a_failure_in_the_pipelines_code_leads_to_a_new_run_that_reuses_the_steps_before(
        tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    target = _taxi(tmp_path, column="tipz")
    fake_runs.use_fake_steps(monkeypatch, {"transform": {"fail": _traceback_of(target)}})
    assert cli.main(["run", "p.py"]) == cli.EXIT_FAILED
    err = capsys.readouterr().err
    (failed,) = runs.all_runs()
    assert _last_line(err) == (
        f"estflow run: run {failed.run_id} failed in the pipeline's own code at p.py:7, in "
        "big_tipper: fix it, then start a new run (steps whose inputs did not change are "
        "reused from the cache, so nothing finished is lost): estflow run p.py")
    assert "--resume" not in err

    # the advice holds: after the fix, a new run reuses ingest (its inputs did not change)
    _taxi(tmp_path, column="tips")
    fake_runs.use_fake_steps(monkeypatch, {})
    assert cli.main(["run", "p.py"]) == 0
    again = runs.all_runs()[-1]
    assert again.run_id != failed.run_id
    assert _statuses(again) == {"ingest": "reused", "transform": "ran", "train": "ran",
                                "evaluate": "ran", "push": "ran"}
    assert again.data["steps"]["ingest"]["reused_from"] == failed.run_id


def test_a_failure_outside_the_pipeline_file_offers_resume_only(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _taxi(tmp_path)
    full = "OSError: [Errno 28] No space left on device: '/scratch/shard-7'"
    fake_runs.use_fake_steps(monkeypatch, {"train": {"fail": full}})
    assert cli.main(["run", "p.py"]) == cli.EXIT_FAILED
    err = capsys.readouterr().err
    (failed,) = runs.all_runs()
    assert _last_line(err) == (
        f"estflow run: run {failed.run_id} failed outside the pipeline file (No space left on "
        "device); once that is fixed, continue it (finished steps are reused): estflow run "
        f"p.py --resume {failed.run_id}")
    assert "start a new run" not in err


def test_a_failure_it_cannot_place_offers_both_each_with_its_condition(tmp_path, monkeypatch,
                                                                        capsys):
    monkeypatch.chdir(tmp_path)
    _taxi(tmp_path)
    fake_runs.use_fake_steps(monkeypatch, {"train": {"fail": "an assertion in TensorFlow"}})
    assert cli.main(["run", "p.py"]) == cli.EXIT_FAILED
    err = capsys.readouterr().err
    (failed,) = runs.all_runs()
    lines = err.rstrip("\n").splitlines()
    assert lines[-2].endswith("If the cause is in p.py (its declaration or its code), fix it "
                              "and start a new run (steps whose inputs did not change are "
                              "reused from the cache): estflow run p.py")
    assert lines[-1].endswith("continue the run instead (finished steps are reused): "
                              f"estflow run p.py --resume {failed.run_id}")


def test_resume_after_the_declaration_changed_is_refused_and_unchanged_it_continues(
        tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    target = _taxi(tmp_path)
    broken = tmp_path / "broken"
    broken.touch()
    fake_runs.use_fake_steps(monkeypatch, {"train": {"fail_file": str(broken)}})
    assert cli.main(["run", "p.py"]) == cli.EXIT_FAILED
    (failed,) = runs.all_runs()
    original = target.read_text()
    target.write_text(original + "pipeline = dataclasses.replace(pipeline, train=ef.TrainSpec("
                      "max_steps=7, batch_size=16))\n")
    capsys.readouterr()
    assert cli.main(["run", "p.py", "--resume"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert f"the pipeline changed since run {failed.run_id} (train.batch_size, " \
           "train.max_steps)" in err
    assert "put p.py back as it was" in err
    assert len(runs.find_run(failed.run_id).data["attempts"]) == 1  # nothing started
    # put back as it was, it continues, from another directory too (its push target pinned
    # where the run started)
    target.write_text(original)
    broken.unlink()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert cli.main(["run", "../p.py", "--resume", str(failed.run_dir)]) == 0
    out, err = capsys.readouterr()
    assert "changed" not in out + err and "(resumed)" in out
    assert runs.find_run(str(failed.run_dir)).data["status"] == "succeeded"


def test_resume_of_a_span_is_not_taken_for_a_change(tmp_path, monkeypatch, capsys):
    """A run's spec records the span it read; the file has the placeholder."""
    monkeypatch.chdir(tmp_path)
    with open(TAXI_DATA) as src:
        rows = list(itertools.islice(src, 51))
    for day in ("2024-01-01", "2024-01-02"):
        (tmp_path / "data" / day).mkdir(parents=True)
        (tmp_path / "data" / day / "trips.csv").write_text("".join(rows))
    (tmp_path / "p.py").write_text(
        "import dataclasses\nimport estflow.dsl as ef\n"
        "from estflow.pipelines.examples import taxi\n"
        "pipeline = dataclasses.replace(taxi.pipeline, source=ef.CsvSource("
        "'data/{span:%Y-%m-%d}/*.csv', spans=ef.Spans()))\n")
    broken = tmp_path / "broken"
    broken.touch()
    fake_runs.use_fake_steps(monkeypatch, {"train": {"fail_file": str(broken)}})
    assert cli.main(["run", "p.py", "--span", "2024-01-01"]) == cli.EXIT_FAILED
    broken.unlink()
    capsys.readouterr()
    assert cli.main(["run", "p.py", "--resume"]) == 0
    out, err = capsys.readouterr()
    assert "changed" not in out + err
    (run,) = runs.all_runs()
    assert run.data["status"] == "succeeded"
    assert "2024-01-01" in (run.run_dir / "pipeline.json").read_text()


@pytest.mark.parametrize("code, kind, detail", [
    (-signal.SIGKILL, "unknown", "killed (SIGKILL: what the system's out-of-memory killer"),
    (128 + signal.SIGKILL, "unknown", "SIGKILL"),
    (-signal.SIGSEGV, "outside", "stopped by SIGSEGV"),
    (4, "declaration", "the data does not fit its declaration"),
])
def test_what_an_exit_status_says_of_the_cause(code, kind, detail):
    failed = StepFailed(f"step 'train' failed (exit code {code}); last lines:\n    x\n"
                        "full log: /nonexistent/log.txt")
    failed.returncode = code
    cause = _stopping.failure_cause(failed, None)
    assert cause.kind == kind and detail in cause.detail


def test_memory_is_either_the_pipeline_or_the_machine():
    failed = StepFailed("step 'train' failed (exit code 1); last lines:\n"
                        "    tensorflow.python.framework.errors_impl.ResourceExhaustedError: "
                        "OOM when allocating tensor\nfull log: /nonexistent/log.txt")
    failed.returncode = 1
    assert _stopping.failure_cause(failed, None).kind == "unknown"


@pytest.mark.slow
def test_a_real_transform_failing_in_the_derive_function_names_it(tmp_path, monkeypatch, capsys):
    """The real ingest and transform steps: the traceback tf.Transform's Beam job prints runs
    through the pipeline file, and the advice names the frame."""
    monkeypatch.chdir(tmp_path)
    with open(TAXI_DATA) as src, open(tmp_path / "data.csv", "w") as dst:
        dst.writelines(itertools.islice(src, 301))
    (tmp_path / "p.py").write_text(
        "import dataclasses\nimport estflow.dsl as ef\n"
        "from estflow.pipelines.examples import taxi\n\n\n"
        "def big_tipper(columns):\n"
        "    return {'big_tipper': columns['tipz'] > 0.2 * columns['fare']}\n\n\n"
        "pipeline = dataclasses.replace(\n"
        "    taxi.pipeline, source=ef.CsvSource('data.csv'),\n"
        "    derive=ef.Derive(big_tipper, outputs=(ef.Column('big_tipper', 'int'),)))\n")
    assert cli.main(["run", "p.py"]) == cli.EXIT_FAILED
    err = capsys.readouterr().err
    (failed,) = runs.all_runs()
    assert _statuses(failed) == {"ingest": "ran", "transform": "failed"}
    assert _last_line(err).startswith(
        f"estflow run: run {failed.run_id} failed in the pipeline's own code at p.py:7, in "
        "big_tipper: fix it, then start a new run")
    assert _last_line(err).endswith(": estflow run p.py")

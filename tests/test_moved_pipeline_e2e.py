"""Step keys follow content, not where a pipeline file is: the real CLI, the default environment
(no ESTFLOW_HOME: runs under ./estflow_runs), the real steps on a sample of the taxi rows. A
pipeline copied under another name into another directory, with its data, reuses every step;
editing its derive function's body reruns transform and the steps after it, not ingest, and
``estflow runs diff`` names the function."""

import itertools
import shutil
import textwrap
from pathlib import Path

import pytest

from estflow.pipelines import cli
from estflow.pipelines.examples import taxi
from estflow.pipelines.local import runs

DATA = Path(taxi.__file__).parent / "data" / "chicago_taxi" / "data.csv"

PIPELINE = textwrap.dedent("""\
    import dataclasses

    import estflow.dsl as ef
    from estflow.pipelines.examples import taxi


    def big_tipper(columns):
        import tensorflow as tf

        return {"big_tipper": tf.cast(columns["tips"] > 0.2 * columns["fare"], tf.int64)}


    def unrelated():
        return "not read by any step"


    pipeline = dataclasses.replace(
        taxi.pipeline, source=ef.CsvSource("sample.csv"),
        derive=ef.Derive(big_tipper, outputs=(ef.Column("big_tipper", "int"),)),
        train=ef.TrainSpec(max_steps=100, batch_size=64),
        run_config=ef.RunConfig(save_checkpoints_steps=100, log_step_count_steps=100),
        push=ef.PushTarget("serving", "taxi"))
""")

# every step reused but push, which always runs (and publishes nothing already served)
REUSED = {"ingest": "reused", "transform": "reused", "train": "reused", "evaluate": "reused",
          "push": "ran"}


def _statuses(record: runs.RunRecord) -> dict[str, str]:
    return {name: step["status"] for name, step in record.data["steps"].items()}


def _same_estflow(first: runs.RunRecord, second: runs.RunRecord) -> None:
    if second.data["estflow_code"] != first.data["estflow_code"]:  # a shared checkout
        pytest.skip("estflow's step code was edited during the test: its steps ran again, as "
                    "they should")


@pytest.mark.slow
def test_a_copied_pipeline_reuses_every_step_and_an_edit_reruns_what_reads_it(
        tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("ESTFLOW_HOME", raising=False)  # the default: ./estflow_runs
    monkeypatch.chdir(tmp_path)
    first_dir, second_dir = Path("project"), Path("elsewhere") / "checkout"
    first_dir.mkdir()
    with open(DATA) as src, open(first_dir / "sample.csv", "w") as dst:
        dst.writelines(itertools.islice(src, 1001))
    (first_dir / "taxi.py").write_text(PIPELINE)

    assert cli.main(["run", "project/taxi.py"]) == 0
    (first,) = runs.all_runs()
    assert set(_statuses(first).values()) == {"ran"}

    # `cp` the pipeline and its data to a new name in another directory (another checkout)
    second_dir.mkdir(parents=True)
    shutil.copy(first_dir / "taxi.py", second_dir / "taxi_wide.py")
    shutil.copy(first_dir / "sample.csv", second_dir / "sample.csv")
    assert cli.main(["run", "elsewhere/checkout/taxi_wide.py"]) == 0
    copied = runs.all_runs()[-1]
    _same_estflow(first, copied)
    assert _statuses(copied) == REUSED

    # an edit of the derive function's body: transform and what follows run again
    edited = second_dir / "taxi_wide.py"
    text = edited.read_text()
    edited.write_text(text.replace("0.2 * columns", "0.25 * columns"))
    assert cli.main(["run", str(edited)]) == 0
    third = runs.all_runs()[-1]
    _same_estflow(copied, third)
    assert _statuses(third) == {"ingest": "reused", "transform": "ran", "train": "ran",
                                "evaluate": "ran", "push": "ran"}

    capsys.readouterr()
    assert cli.main(["runs", "diff", copied.run_id, third.run_id]) == 0
    out = capsys.readouterr().out
    assert "derive.fn big_tipper: source changed" in out
    lines = {line.split(":")[0].strip(): line for line in out.splitlines()
             if line.startswith("  ")}
    assert "reused -> ran" in lines["transform"] and "big_tipper" in lines["transform"]
    assert "reused -> reused" in lines["ingest"]

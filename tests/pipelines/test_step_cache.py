"""``estflow run``'s step cache, resume and run history, with fake steps
(:mod:`tests.pipelines.fake_runs`: the five steps as quick processes, no TensorFlow or Beam)
behind the real fingerprint step, runner, cache and records."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import socket
from pathlib import Path

import pytest

import estflow.dsl as ef
from estflow.dsl.contracts import Files
from estflow.pipelines import cli
from estflow.pipelines.examples import taxi
from estflow.pipelines.local import runner as local_runner
from estflow.pipelines.local import runs
from estflow.pipelines.local.step_cache import StepCache
from tests.pipelines import fake_runs

DATA = Path(taxi.__file__).parent / "data" / "chicago_taxi" / "data.csv"
ALREADY_SERVED = {"pushed": False, "already_served": True, "model_name": "taxi", "version": 7,
                  "path": "/models/taxi/7", "fingerprint": "f" * 64, "reasons": ["same"]}


@pytest.fixture(autouse=True)
def _steps_import_the_tests(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))


def _pipeline_file(folder: Path, name: str = "p", *, rows: int = 50, model: str = "",
                   data: Path | None = None) -> Path:
    """A taxi pipeline reading ``rows`` rows of the taxi data (copied into ``folder``)."""
    data = data or folder / "data.csv"
    if not data.exists():
        with open(DATA) as src, open(data, "w") as dst:
            dst.writelines(itertools.islice(src, rows + 1))
    path = folder / f"{name}.py"
    path.write_text(
        "import dataclasses\nimport estflow.dsl as ef\n"
        "from estflow.pipelines.examples import taxi\n"
        f"pipeline = dataclasses.replace(taxi.pipeline, source=ef.CsvSource({str(data)!r}))\n"
        + (f"pipeline = dataclasses.replace(pipeline, model=dataclasses.replace("
           f"pipeline.model, {model}))\n" if model else ""))
    return path


def _run(monkeypatch, capsys, target, *args, steps=None) -> tuple[int, dict, str]:
    """``estflow run`` with fake steps: (exit status, the run's record, its output)."""
    fake_runs.use_fake_steps(monkeypatch, steps or {})
    status = cli.main(["run", str(target), *args])
    out, err = capsys.readouterr()
    latest = runs.all_runs()[-1]
    return status, latest.data, out + err


def _statuses(record: dict) -> dict[str, str]:
    return {name: step["status"] for name, step in record["steps"].items()}


ALL_RAN = {"ingest": "ran", "transform": "ran", "train": "ran", "evaluate": "ran", "push": "ran"}
REUSED = {"ingest": "reused", "transform": "reused", "train": "reused", "evaluate": "reused",
          "push": "ran"}


def test_an_identical_rerun_reuses_every_step_but_push_and_says_so(tmp_path, monkeypatch,
                                                                    capsys):
    target = _pipeline_file(tmp_path)
    status, first, _ = _run(monkeypatch, capsys, target)
    assert (status, _statuses(first)) == (0, ALL_RAN)
    push = {"push": {"emit": {Files.PUSH_RESULT: ALREADY_SERVED}}}
    status, second, out = _run(monkeypatch, capsys, target, steps=push)
    assert status == 0  # the served version is this model: delivered
    assert _statuses(second) == REUSED
    assert "<== train reused: cache key" in out and f"made by run {first['run']}" in out
    assert "Nothing pushed: taxi version 7 at /models/taxi/7 already serves this model" in out
    for name in ("ingest", "transform", "train", "evaluate"):
        assert second["steps"][name]["key"] == first["steps"][name]["key"]
        assert second["steps"][name]["reused_from"] == first["run"]
    # the run directory links each artifact to the cache entry holding it
    link = runs.home() / "chicago-taxi" / second["run"] / "train" / "model"
    assert link.is_symlink() and (link / "train.json").is_file()
    assert Path(second["steps"]["train"]["outputs"]["model"]["path"]).parent.parent == \
        runs.cache_root() / "train"


def test_the_ingest_step_gets_the_source_digest_the_run_started_with(tmp_path, monkeypatch,
                                                                    capsys):
    """The ingest step checks it again after reading (test_ingest.py: a changed source fails
    the step); the runner hands it the fingerprint step's digest."""
    _, record, _ = _run(monkeypatch, capsys, _pipeline_file(tmp_path))
    examples = Path(record["steps"]["ingest"]["outputs"]["examples"]["path"])
    args = json.loads((examples / "ingest.json").read_text())["args"]
    assert record["source"]["digest"]
    assert args["--source-digest"] == record["source"]["digest"]


def test_a_model_change_reuses_ingest_and_transform(tmp_path, monkeypatch, capsys):
    _run(monkeypatch, capsys, _pipeline_file(tmp_path))
    wider = _pipeline_file(tmp_path, "wider", model="dnn_hidden_units=(64, 32)")
    status, record, _ = _run(monkeypatch, capsys, wider)
    assert _statuses(record) == {**ALL_RAN, "ingest": "reused", "transform": "reused"}


def test_new_data_reruns_every_step(tmp_path, monkeypatch, capsys):
    target = _pipeline_file(tmp_path)
    _, first, _ = _run(monkeypatch, capsys, target)
    with open(tmp_path / "data.csv") as f:
        lines = f.readlines()
    (tmp_path / "data.csv").write_text("".join(lines[:-1]))  # a row less
    _, second, _ = _run(monkeypatch, capsys, target)
    assert _statuses(second) == ALL_RAN
    assert second["source"]["digest"] != first["source"]["digest"]


def test_no_cache_runs_the_steps_named_and_those_after_them(tmp_path, monkeypatch, capsys):
    target = _pipeline_file(tmp_path)
    _run(monkeypatch, capsys, target)
    _, record, _ = _run(monkeypatch, capsys, target, "--no-cache", "train")
    assert _statuses(record) == {**ALL_RAN, "ingest": "reused", "transform": "reused"}
    _, record, _ = _run(monkeypatch, capsys, target, "--no-cache")
    assert _statuses(record) == ALL_RAN
    _, record, _ = _run(monkeypatch, capsys, target)
    assert _statuses(record) == REUSED
    assert cli.main(["run", str(target), "--no-cache", "trian"]) == cli.EXIT_USAGE
    assert "Unknown: ['trian']" in capsys.readouterr().err


def test_a_failed_run_is_resumed_reusing_its_finished_steps(tmp_path, monkeypatch, capsys):
    target = _pipeline_file(tmp_path)
    broken = tmp_path / "broken"
    broken.touch()
    train = {"train": {"fail_file": str(broken)}}
    status, failed, out = _run(monkeypatch, capsys, target, steps=train)
    assert status == cli.EXIT_FAILED
    assert _statuses(failed) == {"ingest": "ran", "transform": "ran", "train": "failed"}
    assert failed["status"] == "failed" and failed["steps"]["train"]["exit_code"] == 3
    assert f"estflow run {target} --resume {failed['run']}" in out  # the way on
    # what the killed step left in its partial output (a checkpoint) is where it continues
    (partial,) = (runs.cache_root() / "train").glob("*.partial")
    (partial / "model" / "ckpt-1.index").write_text("")
    broken.unlink()
    status, resumed, out = _run(monkeypatch, capsys, target, "--resume", steps=train)
    assert status == 0 and "(resumed)" in out
    assert resumed["run"] == failed["run"]  # the same run, continued
    assert [a["status"] for a in resumed["attempts"]] == ["failed", "succeeded"]
    assert resumed["status"] == "succeeded"
    assert _statuses(resumed) == {**ALL_RAN, "ingest": "reused", "transform": "reused"}
    model = Path(resumed["steps"]["train"]["outputs"]["model"]["path"])
    assert (model / "ckpt-1.index").is_file()  # continued where it was, not emptied
    assert not list((runs.cache_root() / "train").glob("*.partial"))
    # a run that succeeded cannot be resumed
    assert cli.main(["run", str(target), "--resume"]) == cli.EXIT_USAGE
    assert "only a failed or interrupted run can be resumed" in capsys.readouterr().err


def test_the_pipeline_may_follow_an_option_with_an_optional_value(tmp_path, monkeypatch,
                                                                  capsys):
    """``estflow run --resume p.py`` and ``--no-cache p.py``: argparse gives the option the
    pipeline; the command gives it back."""
    target = _pipeline_file(tmp_path)
    broken = tmp_path / "broken"
    broken.touch()
    train = {"train": {"fail_file": str(broken)}}
    fake_runs.use_fake_steps(monkeypatch, train)
    assert cli.main(["run", str(target)]) == cli.EXIT_FAILED
    failed = runs.all_runs()[-1].data
    broken.unlink()
    capsys.readouterr()
    assert cli.main(["run", "--resume", str(target)]) == 0
    resumed = runs.all_runs()[-1].data
    assert resumed["run"] == failed["run"] and resumed["status"] == "succeeded"
    assert cli.main(["run", "--no-cache", str(target)]) == 0
    assert _statuses(runs.all_runs()[-1].data) == ALL_RAN
    assert cli.main(["run", "--no-cache", "train", str(target)]) == 0  # STEP, then PIPELINE
    assert _statuses(runs.all_runs()[-1].data) == {**ALL_RAN, "ingest": "reused",
                                                   "transform": "reused"}
    capsys.readouterr()
    for words in (["--resume", failed["run"]], ["--no-cache", "train"], []):
        assert cli.main(["run", *words]) == cli.EXIT_USAGE
        assert "estflow run needs a PIPELINE" in capsys.readouterr().err


def test_a_new_run_after_a_failure_starts_the_stopped_step_afresh(tmp_path, monkeypatch,
                                                                    capsys):
    target = _pipeline_file(tmp_path)
    broken = tmp_path / "broken"
    broken.touch()
    train = {"train": {"fail_file": str(broken)}}
    _run(monkeypatch, capsys, target, steps=train)
    (partial,) = (runs.cache_root() / "train").glob("*.partial")
    (partial / "model" / "ckpt-1.index").write_text("")
    broken.unlink()
    status, record, _ = _run(monkeypatch, capsys, target, steps=train)
    assert status == 0 and _statuses(record)["ingest"] == "reused"
    model = Path(record["steps"]["train"]["outputs"]["model"]["path"])
    assert not (model / "ckpt-1.index").exists()


def test_a_killed_run_reads_as_interrupted_and_can_be_resumed(tmp_path):
    record = runs.RunRecord.start(runs.new_run_dir("p"), "p", version="1")
    record.data["attempts"][-1]["pid"] = 2 ** 22 + 12345  # no such process
    record.save()
    assert runs.effective_status(record.data) == "interrupted"
    assert runs.resumable_run("p", None).run_id == record.run_id


def test_the_record_says_what_each_step_read_and_wrote(tmp_path, monkeypatch, capsys):
    _, record, _ = _run(monkeypatch, capsys, _pipeline_file(tmp_path))
    train = record["steps"]["train"]
    evaluate = record["steps"]["evaluate"]
    assert train["inputs"]["transformed"]["fingerprint"] == \
        record["steps"]["transform"]["outputs"]["transformed"]["fingerprint"]
    assert set(evaluate["inputs"]) == {"examples", "model"}
    assert train["metrics"] == {"global_step": 200}
    assert evaluate["metrics"]["auc"] == 0.9 and record["metrics"]["auc"] == 0.9
    assert train["exit_code"] == 0 and train["seconds"] >= 0
    assert train["parameters"]["spec"] == "train/spec.json"
    run_dir = runs.home() / "chicago-taxi" / record["run"]
    spec = ef.Pipeline.from_json((run_dir / "train" / "spec.json").read_text())
    assert spec.model == taxi.pipeline.model and spec.source.path == "unread"
    assert record["push"]["version"] == 7 and record["source"]["objects"]


def test_runs_list_show_and_diff(tmp_path, monkeypatch, capsys):
    _, first, _ = _run(monkeypatch, capsys, _pipeline_file(tmp_path))
    _, second, _ = _run(monkeypatch, capsys,
                        _pipeline_file(tmp_path, "wider", model="dnn_hidden_units=(64, 32)"),
                        steps={"evaluate": {"emit": {Files.METRICS: {
                            "head": "binary", "metrics": {"auc": 0.95, "examples": 10}}}}})
    assert cli.main(["runs", "list"]) == 0
    out = capsys.readouterr().out
    assert first["run"] in out and second["run"] in out
    assert "succeeded" in out and "auc=0.9000" in out and "auc=0.9500" in out
    assert "5/0" in out and "3/2" in out  # steps ran / reused
    assert cli.main(["runs", "show", second["run"]]) == 0
    out = capsys.readouterr().out
    assert "ingest     reused" in out and first["run"] in out
    assert "pushed as taxi version 7" in out and "trained in this run" in out
    assert cli.main(["runs", "diff", first["run"], second["run"]]) == 0
    out = capsys.readouterr().out
    assert "model.dnn_hidden_units[0]: 32 -> 64" in out
    assert "data: same" in out
    assert "ingest: same key" in out and "functions: same" in out
    assert "train: key changed" in out and "model.dnn_hidden_units[0]" in out.split(
        "train: key changed")[1].splitlines()[0]  # why train ran again
    assert "auc: 0.9000 -> 0.9500 (+0.0500)" in out
    assert cli.main(["runs", "show", "nope"]) == cli.EXIT_USAGE
    assert cli.main(["runs", "list", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2


def test_runs_show_follows_a_pushed_version_s_lineage(tmp_path, monkeypatch, capsys):
    _, record, _ = _run(monkeypatch, capsys, _pipeline_file(tmp_path))
    version = tmp_path / "serving" / "taxi" / "7"
    (version / "assets.extra").mkdir(parents=True)
    run_dir = runs.home() / "chicago-taxi" / record["run"]
    (version / Files.LINEAGE).write_text(json.dumps({"run": str(run_dir)}))
    assert runs.find_run(str(version)).run_id == record["run"]


def test_a_relative_push_target_resolves_against_the_working_directory(tmp_path, monkeypatch,
                                                                       capsys):
    monkeypatch.chdir(tmp_path)
    pinned = local_runner.pin_push_target(taxi.pipeline)
    assert pinned.push.base_path == str(tmp_path / "serving_models")
    assert local_runner.pin_push_target(pinned) == pinned
    gs = dataclasses.replace(taxi.pipeline, push=ef.PushTarget("gs://b/m", "taxi"))
    assert local_runner.pin_push_target(gs) == gs
    _, record, _ = _run(monkeypatch, capsys, _pipeline_file(tmp_path))
    spec = ef.Pipeline.from_json((runs.home() / "chicago-taxi" / record["run"] /
                                  Files.SPEC).read_text())
    assert spec.push.base_path == str(tmp_path / "serving_models")


def test_a_workdir_holding_a_run_is_not_reused_silently(tmp_path, monkeypatch, capsys):
    target = _pipeline_file(tmp_path)
    fake_runs.use_fake_steps(monkeypatch, {})
    assert cli.main(["run", str(target), "--workdir", str(tmp_path / "w")]) == 0
    capsys.readouterr()
    assert cli.main(["run", str(target), "--workdir", str(tmp_path / "w")]) == cli.EXIT_USAGE
    assert f"--resume {tmp_path / 'w'}" in capsys.readouterr().err


def test_a_cache_entry_appears_whole_or_not_at_all(tmp_path):
    cache = StepCache(tmp_path)
    partial = cache.partial("train", "k1", fresh=True)
    (partial / "model").mkdir()
    assert cache.lookup("train", "k1") is None
    entry = cache.commit("train", "k1", {"run": "r"})
    assert cache.lookup("train", "k1").info["run"] == "r"
    assert (entry.artifact("model")).is_dir() and not partial.exists()
    again = cache.partial("train", "k1", fresh=True)  # --no-cache: computed again, replaced
    (again / "model").mkdir()
    assert cache.commit("train", "k1", {"run": "r2"}).info["run"] == "r2"
    assert [p.name for p in (tmp_path / "train").iterdir()] == ["k1"]  # nothing left over


def test_a_cache_entry_lists_its_files_and_says_what_is_damaged(tmp_path):
    cache = StepCache(tmp_path)
    partial = cache.partial("transform", "k1", fresh=True)
    (partial / "transformed" / "train").mkdir(parents=True)
    shards = [partial / "transformed" / "train" / f"part-{i}.gz" for i in range(5)]
    for i, shard in enumerate(shards):
        shard.write_bytes(b"x" * (10 + i))
    entry = cache.commit("transform", "k1", {"run": "r"})
    assert entry.info["files"] == {f"transformed/train/part-{i}.gz": 10 + i for i in range(5)}
    assert cache.lookup("transform", "k1").damage == ()
    kept = entry.path / "transformed" / "train"
    (kept / "part-1.gz").unlink()
    (kept / "part-3.gz").write_bytes(b"x")  # truncated
    (kept / "extra.gz").write_bytes(b"y")  # a file more is no damage
    damaged = cache.lookup("transform", "k1")
    assert damaged.damage == ("transformed/train/part-1.gz is missing (11 bytes when cached)",
                              "transformed/train/part-3.gz has 1 bytes (13 when cached)")
    for shard in ("part-0.gz", "part-2.gz", "part-4.gz"):
        (kept / shard).unlink()
    assert damaged.path.is_dir()
    assert cache.lookup("transform", "k1").describe_damage().endswith("; and 2 more")
    # an entry written before entries listed their files: nothing to check against
    old = cache.partial("train", "k2", fresh=True)
    (old / "model").mkdir()
    written = cache.commit("train", "k2", {"run": "r"})
    info = json.loads((written.path / "entry.json").read_text())
    del info["files"]
    (written.path / "entry.json").write_text(json.dumps(info))
    assert cache.lookup("train", "k2").damage == ()


def test_a_damaged_cache_entry_is_named_and_its_step_runs_again(tmp_path, monkeypatch, capsys):
    """A shard deleted from a cached transform output: the next run says so and runs the
    transform again (instead of training on part of the data)."""
    target = _pipeline_file(tmp_path)
    shards = {"transform": {"emit": {"train/part-00000.gz": "a" * 20,
                                     "train/part-00001.gz": "b" * 30}}}
    _, first, _ = _run(monkeypatch, capsys, target, steps=shards)
    entry = runs.cache_root() / "transform" / first["steps"]["transform"]["key"]
    (entry / "transformed" / "train" / "part-00001.gz").unlink()
    status, second, out = _run(monkeypatch, capsys, target, steps=shards)
    assert status == 0
    assert (f"transform: the cached outputs of key {first['steps']['transform']['key'][:12]} "
            f"(made by run {first['run']}) are damaged: transformed/train/part-00001.gz is "
            "missing (30 bytes when cached). Running the step again") in out
    assert _statuses(second)["transform"] == "ran" and _statuses(second)["ingest"] == "reused"
    assert (entry / "transformed" / "train" / "part-00001.gz").read_text() == "b" * 30
    _, third, _ = _run(monkeypatch, capsys, target, steps=shards)
    assert _statuses(third)["transform"] == "reused"  # whole again


def _entries() -> set[tuple[str, str]]:
    return {(step, key) for step, key, _ in StepCache(runs.cache_root()).entries()}


def _keys(record: dict) -> set[tuple[str, str]]:
    return {(name, step["key"]) for name, step in record["steps"].items()
            if name != "push" and step.get("key")}


def test_prune_keeps_what_the_last_runs_used_and_removes_the_rest(tmp_path, monkeypatch,
                                                                   capsys):
    target = _pipeline_file(tmp_path)
    _, first, _ = _run(monkeypatch, capsys, target)
    wider = _pipeline_file(tmp_path, "wider", model="dnn_hidden_units=(64, 32)")
    _, second, _ = _run(monkeypatch, capsys, wider)  # ingest and transform shared with first
    with open(tmp_path / "data.csv") as f:
        lines = f.readlines()
    (tmp_path / "data.csv").write_text("".join(lines[:-1]))
    _, third, _ = _run(monkeypatch, capsys, target)  # new data: every step new
    everything = _keys(first) | _keys(second) | _keys(third)
    assert _entries() == everything

    # too recent to prune by default (a run starting now may be about to reuse them)
    assert runs.prune_cache(1).removed == [] and _entries() == everything
    dry = runs.prune_cache(1, recent_seconds=0, dry_run=True)
    assert {(s, k) for s, k, _ in dry.removed} == everything - _keys(third)
    assert _entries() == everything  # a dry run removes nothing
    # an entry a running step holds (its lock) is not removed
    held = sorted(_keys(first) - _keys(third))[0]
    with StepCache(runs.cache_root()).lock(*held):
        pruned = runs.prune_cache(1, recent_seconds=0)
    assert [(s, k) for s, k, _ in pruned.busy] == [held]
    assert _entries() == _keys(third) | {held}
    assert all(size > 0 for *_, size in pruned.removed)
    assert runs.prune_cache(3, recent_seconds=0).removed == []  # the held one: the 3rd last's
    assert cli.main(["runs", "prune", "--keep", "1", "--recent-hours", "0"]) == 0
    out = capsys.readouterr().out
    assert "estflow runs prune: removed" in out and _entries() == _keys(third)

    # the last run again: every step reused; the first run's model again: its steps run
    _, again, _ = _run(monkeypatch, capsys, target)
    assert _statuses(again) == REUSED
    (tmp_path / "data.csv").write_text("".join(lines))
    _, old, _ = _run(monkeypatch, capsys, target)
    assert _statuses(old) == ALL_RAN
    with pytest.raises(ValueError, match="at least 1 run"):
        runs.prune_cache(0)


def test_prune_keeps_what_a_running_run_uses(tmp_path, monkeypatch, capsys):
    _, first, _ = _run(monkeypatch, capsys, _pipeline_file(tmp_path))
    _run(monkeypatch, capsys, _pipeline_file(tmp_path, "wider",
                                             model="dnn_hidden_units=(64, 32)"))
    record = runs.find_run(first["run"])
    record.data["status"] = "running"  # as if this process were still running it
    record.data["attempts"][-1].update(pid=os.getpid(), host=socket.gethostname())
    record.save()
    pruned = runs.prune_cache(1, recent_seconds=0)
    assert pruned.removed == [] and _keys(first) <= _entries()



def test_prune_removes_searches_no_kept_run_ran(tmp_path, monkeypatch, capsys):
    """The tune step's searches (<home>/.tune-studies/<key>) are pruned with the cache: those a
    kept run's tune step ran (its trials.json names the study) stay, as do recent ones and one a
    running search holds (its lock); the rest go."""
    import fcntl
    import time

    from estflow.dsl.contracts import TUNE_STUDIES
    from estflow.dsl.contracts import TUNE_STUDY_LOCK
    from estflow.dsl.contracts import TUNED

    monkeypatch.chdir(tmp_path)
    studies = runs.home() / TUNE_STUDIES
    old = time.time() - 7200
    for key in ("kept", "old", "running", "fresh"):
        (studies / key).mkdir(parents=True)
        (studies / key / "journal.log").write_text("{}\n" * 100)
        if key != "fresh":
            for path in (studies / key, studies / key / "journal.log"):
                os.utime(path, (old, old))
    for pipeline, study in (("a", "old"), ("a", "kept")):  # pipeline a's last run ran "kept"
        record = runs.RunRecord.start(runs.new_run_dir(pipeline), pipeline, version="0")
        hyper = record.run_dir / "tune" / TUNED
        hyper.mkdir(parents=True)
        (hyper / "trials.json").write_text(json.dumps({"study": study, "trials": []}))
        record.step("tune").update(status="ran", outputs={TUNED: {"path": str(hyper)}})
        record.finish("succeeded", 1.0)
        time.sleep(1.1)  # run ids are timestamps
    dry = runs.prune_cache(1, recent_seconds=3600, dry_run=True)
    assert {k for s, k, _ in dry.removed if s == runs.STUDY} == {"old", "running"}
    fd = os.open(studies / "running" / TUNE_STUDY_LOCK, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.utime(studies / "running" / TUNE_STUDY_LOCK, (old, old))  # a search running for hours
    try:
        assert cli.main(["runs", "prune", "--keep", "1"]) == 0
    finally:
        os.close(fd)
    out = capsys.readouterr().out
    assert "removed tune (study) old" in out and "kept tune (study) running" in out
    assert sorted(p.name for p in studies.iterdir()) == ["fresh", "kept", "running"]
    # the search ended: its study goes at the next prune
    assert [k for _, k, _ in runs.prune_cache(1, recent_seconds=3600).removed] == ["running"]
    assert sorted(p.name for p in studies.iterdir()) == ["fresh", "kept"]

"""What ``estflow`` says when it cannot do what was asked: with no command, the help with the
list of commands; ``estflow compile`` refusing, every refusal in one error (issue 32, item 9)."""

from __future__ import annotations

import pytest

from estflow.pipelines import cli
from estflow.pipelines.kubeflow import compiler as kfp_compiler
from estflow.pipelines.kubeflow import images as kfp_images

COMMANDS = ("compile", "run", "runs", "submit", "serve", "predict", "migrate")


def test_no_command_prints_the_commands_and_exits_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert lines[0].startswith("usage: estflow")
    listed = {line.split()[0] for line in lines if line.startswith("    ") and line.split()}
    assert set(COMMANDS) <= listed, captured.err
    assert "estflow COMMAND --help" in lines[-1]


_NEEDS_A_VOLUME = """
import estflow.dsl as ef

pipeline = ef.Pipeline(
    name="tiny", source=ef.CsvSource("gs://bucket/data.csv"), features=(ef.Numeric("x"),),
    label=ef.Label("y"), model=ef.LinearClassifier(feature_columns=("x",)),
    train=ef.TrainSpec(max_steps=10), push=ef.PushTarget("serving_models", "tiny"))
"""


def test_compile_reports_every_refusal_together(tmp_path, monkeypatch, capsys):
    """No image, a local push target, a wrong output name and a bad step image: one error
    naming each, with the source_root note (before: the first alone, one per attempt)."""
    monkeypatch.delenv(kfp_images.ENV, raising=False)
    pipeline = tmp_path / "tiny.py"
    pipeline.write_text(_NEEDS_A_VOLUME)
    status = cli.main(["compile", str(pipeline), "-o", str(tmp_path / "tiny.json"),
                       "--step-image", "train", "--kfp-backend", "1.0"])
    assert status == 2
    err = capsys.readouterr().err
    assert err.startswith("estflow compile: error: 5 problems, all to fix before the pipeline "
                          "compiles:\n"), err
    for problem in ("Received no image, expected --image REF",
                    "Received an invalid value for `--step-image`",
                    "Received an invalid value for `output_path`",
                    "Received an invalid value for `kfp_backend`",
                    "Received an invalid value for `push.base_path`"):
        assert f"\n  - {problem}" in err, problem
    assert "\nnote: " in err and "pass --source-root" in err
    assert not list(tmp_path.glob("*.json")) and not list(tmp_path.glob("*.yaml"))


def test_compile_with_one_refusal_says_it_alone(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(kfp_images.ENV, raising=False)
    pipeline = tmp_path / "tiny.py"
    pipeline.write_text(_NEEDS_A_VOLUME)
    status = cli.main(["compile", str(pipeline), "-o", str(tmp_path / "tiny.yaml"),
                       "--source-root", "/data", "--push-base-path", "gs://bucket/models"])
    assert status == 2
    err = capsys.readouterr().err
    assert err.startswith("estflow compile: error: Received no image"), err
    assert "problems" not in err and "note:" not in err
    assert not (tmp_path / "tiny.yaml").exists()


def test_compile_error_keeps_each_problem():
    one = kfp_compiler.CompileError("a")
    assert str(one) == "a" and one.problems == ("a",)
    two = kfp_compiler.CompileError("a", "b")
    assert two.problems == ("a", "b")
    assert str(two) == "2 problems, all to fix before the pipeline compiles:\n  - a\n  - b"

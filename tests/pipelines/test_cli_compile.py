"""``estflow compile`` and the CLI's error handling.

The real entry point runs in a subprocess (what users run); the error matrix calls
``cli.main`` in-process, which is the same code without the interpreter start-up.
"""

import os
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from estflow.pipelines import cli
from estflow.pipelines.kubeflow import compiler as kfp_compiler
from tests.pipelines.kfp_ir import as_golden

REPO = Path(__file__).resolve().parents[2]
TAXI_FILE = REPO / "pipelines" / "examples" / "taxi.py"
GOLDEN = Path(__file__).parent / "goldens" / "taxi.yaml"
# The taxi example pushes to a relative local path, which no Kubeflow task can reach: it is
# compiled with a bucket, as its golden is.
PUSH = ("--push-base-path", "gs://estflow-examples/serving_models")
# compile wants the image named (the default reference is published by nothing): the goldens'.
IMAGE = ("--image", kfp_compiler.DEFAULT_IMAGE)


def _estflow(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.run([sys.executable, "-m", "estflow.pipelines.cli", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120)


def _write_pipeline(folder: Path, name: str, body: str) -> Path:
    path = folder / f"{name}.py"
    path.write_text("import estflow.dsl as ef\n\n" + textwrap.dedent(body))
    return path


_VALID = """
    pipeline = ef.Pipeline(
        name="tiny", source=ef.CsvSource("data.csv"), features=(ef.Numeric("x"),),
        label=ef.Label("y"), model=ef.LinearClassifier(feature_columns=("x",)),
        train=ef.TrainSpec(max_steps={max_steps}))
"""


# --- the real command ---------------------------------------------------------------------------

def test_compile_the_taxi_example(tmp_path):
    result = _estflow("compile", str(TAXI_FILE), "-o", "taxi.yaml", *PUSH, *IMAGE,
                      cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = tmp_path / "taxi.yaml"
    assert f"to {out.name}: 5 tasks" in result.stdout
    assert "ingest -> transform -> train -> evaluate -> push" in result.stdout
    assert result.stderr == ""
    # Loaded from its file, the example is the installed module: the output is the golden.
    assert as_golden(out.read_bytes()) == as_golden(GOLDEN.read_bytes())


def test_compile_from_the_repository_root_gives_the_golden(tmp_path):
    out = tmp_path / "taxi.yaml"
    result = _estflow("compile", "pipelines/examples/taxi.py", "-o", str(out), *PUSH, *IMAGE,
                      cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert as_golden(out.read_bytes()) == as_golden(GOLDEN.read_bytes())


def test_image_option_names_every_executor_image(tmp_path):
    image = "us-docker.pkg.dev/proj/repo/estflow@sha256:" + "ab" * 32
    result = _estflow("compile", "estflow.pipelines.examples.taxi", "-o", "t.yml",
                      "--image", image, *PUSH, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    spec = next(yaml.safe_load_all((tmp_path / "t.yml").read_text()))  # then the PlatformSpec
    images = {e["container"]["image"] for e in spec["deploymentSpec"]["executors"].values()}
    assert images == {image}


def test_python_dash_m_estflow_pipelines_is_the_cli(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    result = subprocess.run([sys.executable, "-m", "estflow.pipelines", "--version"],
                            cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 0
    assert result.stdout.strip() == f"estflow {metadata.version('estflow')}"


def test_a_bad_target_exits_2_with_a_message_and_no_traceback(tmp_path):
    result = _estflow("compile", "no_such_pipeline.py", "-o", "x.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == ("estflow compile: error: pipeline file not found: "
                             "no_such_pipeline.py\n")
    assert not (tmp_path / "x.yaml").exists()


def test_an_invalid_declaration_exits_2_naming_the_field(tmp_path):
    path = _write_pipeline(tmp_path, "bad", _VALID.format(max_steps=0))
    result = _estflow("compile", str(path), "-o", "x.yaml", *IMAGE, cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith(f"estflow compile: error: the pipeline in {path} is invalid")
    assert "`max_steps`, expected a positive integer. Received: max_steps=0" in result.stderr


# --- errors, in-process -------------------------------------------------------------------------

@pytest.mark.parametrize("name, body, expected", [
    # a cross-object validation error (DslErrors) lists every invalid field
    ("cross_checked", """
     pipeline = ef.Pipeline(
         name="tiny", source=ef.CsvSource("data.csv"), features=(ef.Numeric("x"),),
         label=ef.Label("y"), model=ef.LinearClassifier(feature_columns=("x", "nope")),
         train=ef.TrainSpec(max_steps=5))
     """, "`model.feature_columns[1]`, expected a declared feature"),
    ("no_pipeline", "x = 1\n", "expected exactly one estflow Pipeline at module level, found none"),
])
def test_declaration_and_target_errors(tmp_path, capsys, name, body, expected):
    path = _write_pipeline(tmp_path, name, body)
    assert cli.main(["compile", str(path), "-o", str(tmp_path / "x.yaml"), *IMAGE]) == 2
    err = capsys.readouterr().err
    assert err.startswith("estflow compile: error: ")
    assert expected in err
    assert not (tmp_path / "x.yaml").exists()


@pytest.mark.parametrize("args, expected", [
    (["compile", "no.such.module", "-o", "{tmp}/x.yaml"],
     "cannot load 'no.such.module': No module named 'no'"),
    (["compile", "estflow.pipelines.examples.taxi:FEATURES", "-o", "{tmp}/x.yaml"],
     "`FEATURES` is not an estflow Pipeline (got tuple)"),
    (["compile", "estflow.pipelines.examples.taxi", "-o", "{tmp}/x.json"],
     "expected a file ending in .yaml or .yml"),
    (["compile", "estflow.pipelines.examples.taxi", "-o", "{tmp}/no/dir/x.yaml"],
     "expected a file in an existing directory"),
    (["compile", "estflow.pipelines.examples.taxi", "-o", "{tmp}/x.yaml", "--image", "a b"],
     "Received: image='a b'"),
    (["compile", "estflow.pipelines.examples.taxi", "-o", "{tmp}/x.yaml", "--beam-runner",
      "flink"], "FlinkRunner cannot run with these options: missing --flink_master"),
])
def test_usage_errors_exit_2(tmp_path, capsys, args, expected):
    # The image first: a case's own --image comes later and wins.
    assert cli.main([args[0], *IMAGE, *(a.format(tmp=tmp_path) for a in args[1:])]) == 2
    err = capsys.readouterr().err
    assert err.startswith("estflow compile: error: ") and expected in err
    assert list(tmp_path.iterdir()) == []


def test_a_file_that_is_not_importable_gets_a_note_about_source_root(tmp_path, capsys):
    path = _write_pipeline(tmp_path, "tiny_ok", _VALID.format(max_steps=5))
    assert cli.main(["compile", str(path), "-o", str(tmp_path / "x.yaml"), *IMAGE]) == 0
    captured = capsys.readouterr()
    assert "4 tasks (ingest -> transform -> train -> evaluate)" in captured.out
    assert "pass --source-root" in captured.err
    assert cli.main(["compile", str(path), "-o", str(tmp_path / "y.yaml"), *IMAGE,
                     "--source-root", "/data"]) == 0
    assert "note" not in capsys.readouterr().err


def test_beam_runner_and_options_set_the_beam_options_parameter(tmp_path):
    out = tmp_path / "x.yaml"
    assert cli.main(["compile", "estflow.pipelines.examples.taxi", "-o", str(out), *PUSH,
                     *IMAGE, "--beam-runner", "spark",
                     "--beam-options=--spark_master_url=spark://10.0.0.2:7077"]) == 0
    spec = next(yaml.safe_load_all(out.read_text()))
    default = spec["root"]["inputDefinitions"]["parameters"]["beam_options"]["defaultValue"]
    assert default == "--runner=SparkRunner --spark_master_url=spark://10.0.0.2:7077"


def test_no_cache_disables_caching_everywhere(tmp_path):
    out = tmp_path / "x.yaml"
    assert cli.main(["compile", "estflow.pipelines.examples.taxi", "-o", str(out), *PUSH,
                     *IMAGE, "--no-cache"]) == 0
    spec = next(yaml.safe_load_all(out.read_text()))  # then the PlatformSpec
    # The steps sit in nested DAGs (the exit handler's, push's condition): check every DAG.
    dags = [spec["root"]] + [c for c in spec["components"].values() if "dag" in c]
    tasks = [t for dag in dags for t in dag["dag"]["tasks"].values()]
    assert len(tasks) > 5
    assert all(not t.get("cachingOptions", {}).get("enableCache") for t in tasks)


def test_missing_subcommand_and_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"estflow {metadata.version('estflow')}"


def test_compile_help_says_the_default_image_is_not_published(capsys):
    with pytest.raises(SystemExit):
        cli.main(["compile", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"the reference `make image` tags by default, {kfp_compiler.DEFAULT_IMAGE}, is not " \
           "published" in text
    assert "--step-image STEP=IMAGE" in text


# --- estflow run: only the wiring to the local runner (its behaviour is tested with it) ----------

def test_run_with_a_bad_target_exits_2(tmp_path, capsys):
    assert cli.main(["run", str(tmp_path / "nope.py"), "--workdir", str(tmp_path / "w")]) == 2
    assert capsys.readouterr().err.startswith("estflow run: error: pipeline file not found")


@pytest.mark.slow
def test_run_exits_1_when_a_step_fails(tmp_path):
    path = _write_pipeline(tmp_path, "no_data", _VALID.format(max_steps=5))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    result = subprocess.run([sys.executable, "-m", "estflow.pipelines.cli", "run", str(path),
                             "--workdir", str(tmp_path / "w")], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert "step 'ingest' failed" in result.stderr

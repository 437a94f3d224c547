"""Where a run's outputs go, as a user meets it (issue 32, item 8): the commands of the local
runs page's "Where things go" transcript, verbatim, in a shell, from a fresh checkout holding the
taxi example, in the default environment (no ESTFLOW_HOME) with relative paths. The data
follows the pipeline file; the run store and the push target follow the current directory, and
a run says where they are when they are new, and where this pipeline's earlier runs are.

``estflow`` here is the real CLI planning fake steps (:mod:`tests.pipelines.fake_disk_step`)
behind the real fingerprint step, runner, cache and records: no TensorFlow."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

from estflow.dsl.contracts import Files
from estflow.pipelines.examples import taxi
from tests.pipelines import fake_disk_step
from tests.pipelines import fake_runs
from tests.pipelines.test_run_layout_default_env import default_env

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "pages" / "local-runs.md"
HOME = "/home/me/estflow"  # the checkout the page's transcript runs in


def transcript() -> list[tuple[str, list[str]]]:
    """The page's "Where things go" transcript: (command, the output lines it shows)."""
    section = PAGE.read_text().split("## Where things go", 1)[1]
    block = re.search(r"```text\n(\$ .*?)```", section, re.S).group(1)
    commands: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        else:
            commands[-1][1].append(line)
    return commands


def matches(expected: list[str], output: str, home: Path) -> list[str]:
    """The ``expected`` lines (``...``: anything; the page's checkout is ``home``) not found in
    ``output``, in order."""
    lines, missing, at = output.splitlines(), [], 0
    for line in expected:
        pattern = ".*".join(re.escape(p) for p in line.replace(HOME, str(home)).split("..."))
        found = next((i for i in range(at, len(lines)) if re.fullmatch(pattern, lines[i])), None)
        if found is None:
            missing.append(line)
        else:
            at = found + 1
    return missing


def checkout(tmp_path: Path) -> Path:
    """A fresh checkout holding the taxi example and its data at the paths the page uses."""
    home = tmp_path / "estflow"
    example = Path(taxi.__file__)
    (home / "pipelines" / "examples" / "data" / "chicago_taxi").mkdir(parents=True)
    shutil.copy(example, home / "pipelines" / "examples" / "taxi.py")
    shutil.copy(example.parent / "data" / "chicago_taxi" / "data.csv",
                home / "pipelines" / "examples" / "data" / "chicago_taxi" / "data.csv")
    return home


def run_in_shell(command: str, home: Path, pushes_to: Path) -> subprocess.CompletedProcess:
    """``command`` as a user types it in ``home``, ``estflow`` being the fake-step CLI whose
    push reports ``pushes_to``/1 (made, as a real push makes it)."""
    steps = {"train": {"emit": {Files.TRAIN_RESULT: {"global_step": 200},
                                **fake_runs.CHECKPOINT}},
             "evaluate": {"emit": {Files.REPORT: "<html></html>"}},
             "push": {"emit": {Files.PUSH_RESULT: {**fake_runs.PUSHED,
                                                   "model_name": "chicago_taxi",
                                                   "path": str(pushes_to / "1")}}}}
    python, _, code, plan = fake_disk_step.command(steps)  # python -c CODE STEPS ARGS...
    env = {**default_env(), "FAKE_PY": python, "FAKE_CODE": code, "FAKE_PLAN": plan}
    assert "ESTFLOW_HOME" not in env
    shell = 'estflow() { "$FAKE_PY" -c "$FAKE_CODE" "$FAKE_PLAN" "$@"; }\n' + command
    done = subprocess.run(["bash", "-c", shell], cwd=home, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (pushes_to / "1").mkdir(parents=True)
    return done


def test_the_documented_commands_say_where_the_store_and_push_target_are(tmp_path):
    home = checkout(tmp_path)
    (first, first_says), (second, second_says) = transcript()
    assert first == "estflow run pipelines/examples/taxi.py"
    assert second == "cd pipelines/examples && estflow run taxi.py"

    done = run_in_shell(first, home, home / "serving_models" / "chicago_taxi")
    assert matches(first_says, done.stdout, home) == [], done.stdout
    (run,) = (home / "estflow_runs" / "chicago-taxi").iterdir()
    # the data followed the file; the push target the directory the run started in
    record = json.loads((run / Files.RUN_RECORD).read_text())
    assert record["source"]["objects"][0]["path"].endswith(
        "pipelines/examples/data/chicago_taxi/data.csv")
    spec = json.loads((run / Files.SPEC).read_text())
    assert spec["push"]["base_path"] == str(home / "serving_models")

    examples = home / "pipelines" / "examples"
    done = run_in_shell(second, home, examples / "serving_models" / "chicago_taxi")
    assert matches(second_says, done.stdout, home) == [], done.stdout
    assert (examples / "estflow_runs" / "chicago-taxi").is_dir()

    # the first command again: its store and push target are there, nothing new to say
    again = run_in_shell(first, home, home / "serving_models" / "chicago_taxi2")
    assert "run store:" not in again.stdout and "push target:" not in again.stdout
    assert "earlier run" not in again.stdout

"""The images, built here and run: ``make image`` builds the CPU and slim images (a Debian base
made with debootstrap, the locked wheelhouse, no network in the build), then the taxi pipeline
with user steps, compiled for them (KFP backend 2.17), runs under ``kfp.local.DockerRunner``, each
task a container without network (``network_mode="none"``) as the image's non-root user; the
pushed model is then served by ``estflow serve`` on this host and answers a request.

The user steps (in a pipeline file written to the test's folder, which imports the taxi example;
their functions are found in the containers by that file's path, the folder mounted read-only at
the same path) cover, in the same one run: a step gated on ``ef.blessed()`` reading the
evaluation and writing an artifact, a step gated on that step's result (a ``dsl.If`` on its
output parameter), and a fan-out (``step.map(x=[1, 2])``: a ``dsl.ParallelFor``) whose collected
output a last step reads.

Needs a Docker engine (CI's ``.ci/run`` installs and starts one); skipped where none runs, except
under CI (``CI`` set), where a missing engine fails.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

import pytest

import estflow.dsl as ef
from estflow.pipelines import loader
from tests.pipelines import images_fixture
from tests.pipelines import kfp_local_fakes

pytestmark = pytest.mark.slow

REPO = images_fixture.REPO
IMAGE = images_fixture.IMAGE
TASKS = ("fingerprint", "ingest", "transform", "train", "evaluate", "push", "report",
         "check", "record", "score-items", "score-item", "score", "summarize")

# The taxi example plus user steps: ``check`` when blessed (reads the evaluation, writes an
# artifact), ``record`` when check's auc > 0 (reads that artifact), ``score`` mapped over two
# items (a ParallelFor of ``score-item`` tasks, collected by the task ``score``) and
# ``summarize`` reading the collected output. Each writes what it saw into an output artifact.
STEPS_PIPELINE = """
import dataclasses
import json
from typing import NamedTuple

import estflow.dsl as ef
from estflow.pipelines.examples import taxi


class Checked(NamedTuple):
    auc: float


@ef.step(when=ef.blessed())
def check(evaluation: ef.Input[ef.Evaluation], report: ef.Output[ef.Markdown]) -> Checked:
    auc = json.loads((evaluation / "metrics.json").read_text())["metrics"]["auc"]
    (report / "report.md").write_text("auc %.4f" % auc)
    return Checked(auc=auc)


@ef.step(when=ef.result("check")["auc"] > 0.0)
def record(report: ef.Input[ef.Markdown], table: ef.Output[ef.Dataset]) -> None:
    (table / "recorded.txt").write_text((report / "report.md").read_text())


@ef.step
def score(evaluation: ef.Input[ef.Evaluation], scores: ef.Output[ef.Dataset],
          x: int = 0) -> dict:
    (scores / "score.json").write_text(json.dumps({"x": x}))
    return {"x": x}


@ef.step
def summarize(scores: ef.Input[ef.Dataset], summary: ef.Output[ef.Dataset]) -> dict:
    items = json.loads((scores / "items.json").read_text())
    seen = [json.loads((scores / str(i) / "score.json").read_text())["x"]
            for i in range(len(items))]
    (summary / "seen.json").write_text(json.dumps(seen))
    return {"items": len(seen)}


pipeline = ef.Pipeline(**{
    **{f.name: getattr(taxi.pipeline, f.name) for f in dataclasses.fields(taxi.pipeline)},
    "steps": (check, record, score.map(x=[1, 2]), summarize)})
"""

# In a subprocess (kfp.local's configuration is process-wide): every task in IMAGE's containers,
# without network, the data and the user steps' pipeline file mounted read-only and the push
# target read-write (docker-py's containers.run arguments, which DockerRunner passes on).
DOCKER_RUN = textwrap.dedent("""
    import json
    import sys
    import docker
    import kfp.components
    import kfp.local
    yaml_path, root, data, serving, steps, arguments = sys.argv[1:7]
    mounts = [docker.types.Mount(data, data, type="bind", read_only=True),
              docker.types.Mount(serving, serving, type="bind"),
              docker.types.Mount(steps, steps, type="bind", read_only=True)]
    kfp.local.init(runner=kfp.local.DockerRunner(network_mode="none", mounts=mounts),
                   pipeline_root=root)
    kfp.components.load_component_from_file(yaml_path)(**json.loads(arguments))
""")


# ``make image`` once for this module (shared with test_images_object_stores.py).
images = images_fixture.images


def test_make_image_builds_the_cpu_and_slim_images_without_network(images):
    cpu, slim = images
    for image, imports in ((cpu, "import tensorflow, apache_beam, boto3, google.cloud.storage, "
                                 "estflow.components.train"),
                           (slim, "import kfp.dsl.executor_main, estflow.dsl, boto3")):
        done = subprocess.run(["docker", "run", "--rm", "--network", "none", image, "python3",
                               "-c", f"{imports}; import os; print(os.getuid())"],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split()[-1] == "1000"  # the image's non-root user
    done = subprocess.run(["docker", "run", "--rm", "--network", "none", slim, "python3", "-c",
                           "import tensorflow"], capture_output=True, text=True, timeout=300)
    assert "No module named 'tensorflow'" in done.stderr  # the slim image has no TensorFlow


def _pipeline_file(tmp_path: Path) -> Path:
    """The taxi example with the user steps, in a folder of its own that the containers' user
    (uid 1000) can read: their functions are referenced by this file's path."""
    folder = tmp_path / "steps"
    folder.mkdir()
    path = folder / "taxi_steps.py"
    path.write_text(STEPS_PIPELINE)
    folder.chmod(0o755)
    path.chmod(0o644)
    return path


def _compile(tmp_path: Path, image: str) -> Path:
    done = subprocess.run([sys.executable, "-m", "estflow.pipelines.cli", "compile",
                           str(_pipeline_file(tmp_path)), "-o", "taxi.yaml", "--image", image,
                           "--kfp-backend", "2.17",
                           "--push-base-path", "gs://estflow-examples/serving_models"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=kfp_local_fakes.env())
    assert done.returncode == 0, done.stderr
    assert image in done.stdout and f"{image}-slim" in done.stdout  # compile names both
    return tmp_path / "taxi.yaml"


def _run_in_containers(yaml_path: Path, tmp_path: Path) -> str:
    """The compiled pipeline under DockerRunner, with a short spec pushing to a mounted folder,
    the data read from a mounted folder (``source_root``) and the user steps' file mounted at
    its path: the run's output."""
    root, serving = tmp_path / "root", tmp_path / "serving"
    for folder in (root, serving):
        folder.mkdir()
        folder.chmod(0o777)  # the containers run as the image's user (uid 1000)
    data, steps = REPO / "pipelines" / "examples", tmp_path / "steps"
    small = dataclasses.replace(
        loader.load(str(steps / "taxi_steps.py")).pipeline,
        train=ef.TrainSpec(max_steps=20, batch_size=64),
        push=ef.PushTarget(base_path=str(serving), model_name="chicago_taxi"))
    arguments = {"spec": small.to_json(), "source_root": str(data)}
    done = subprocess.run([sys.executable, "-c", DOCKER_RUN, str(yaml_path), str(root),
                           str(data), str(serving), str(steps), json.dumps(arguments)],
                          cwd=tmp_path,
                          capture_output=True, text=True, timeout=1800, env=kfp_local_fakes.env())
    output = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)  # kfp.local's colours
    assert done.returncode == 0, output[-6000:]
    return output


def test_the_compiled_taxi_pipeline_runs_in_the_images_and_its_push_is_served(images, tmp_path):
    yaml_path = _compile(tmp_path, images[0])
    output = _run_in_containers(yaml_path, tmp_path)
    finished = dict(re.findall(r"Task '([\w-]+)' finished with status (\w+)", output))
    assert set(TASKS) <= set(finished) and set(finished.values()) == {"SUCCESS"}, finished
    assert f"Found image '{images[1]}'" in output  # the report task ran in the slim image
    assert "estflow pipeline chicago-taxi finished: SUCCEEDED" in output
    versions = [p for p in (tmp_path / "serving" / "chicago_taxi").iterdir() if p.name.isdigit()]
    assert len(versions) == 1 and (versions[0] / "saved_model.pb").is_file()
    _assert_the_user_steps_ran(tmp_path / "root", finished, output)
    _assert_served(tmp_path / "serving")


def _assert_the_user_steps_ran(root: Path, finished: dict[str, str], output: str) -> None:
    """The conditions held and their steps ran; the fan-out ran both items and the step reading
    its collected output saw them both, in order."""
    assert {finished[t] for t in ("check", "record", "score", "summarize")} == {"SUCCESS"}
    # kfp.local runs the items at once and their lines may interleave (CI saw one of the two
    # "finished" lines cut by the other item's output): the items' own artifacts, below, show
    # that both ran; no item failed
    assert "Task 'score-item' finished with status SUCCESS" in output
    assert not re.search(r"Task 'score-item' finished with status (?!SUCCESS)", output)
    [recorded] = root.glob("**/record/table/recorded.txt")  # check ran, then record on its auc
    assert recorded.read_text().startswith("auc ")
    items = sorted(root.glob("**/score-item/scores/score.json"))  # the ParallelFor's items
    assert sorted(json.loads(p.read_text())["x"] for p in items) == [1, 2], items
    [seen] = root.glob("**/summarize/summary/seen.json")
    assert json.loads(seen.read_text()) == [1, 2]


def _assert_served(base: Path) -> None:
    """``estflow serve BASE`` on this host answers a classify request for the pushed model."""
    process = subprocess.Popen([sys.executable, "-m", "estflow.pipelines.cli", "serve", str(base),
                                "--port", "0", "--poll-seconds", "0"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=kfp_local_fakes.env())
    try:
        line = process.stdout.readline()
        url = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
        assert url, line + process.stderr.read() if process.poll() is not None else line
        request = urllib.request.Request(
            f"{url[1]}/v1/models/chicago_taxi:classify", method="POST",
            data=json.dumps({"examples": [{"fare": 12.5, "trip_miles": 2.1, "trip_seconds": 600,
                                           "payment_type": "Credit Card",
                                           "company": "Flash Cab"}]}).encode())
        with urllib.request.urlopen(request, timeout=120) as response:
            results = json.loads(response.read())["results"]
        [[(zero, p0), (one, p1)]] = results
        assert (zero, one) == ("0", "1") and abs(p0 + p1 - 1) < 1e-4
    finally:
        process.terminate()
        process.communicate(timeout=60)

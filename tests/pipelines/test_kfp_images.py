"""Which image each compiled task runs: ``estflow compile`` wants the image named (the default
reference is published by nothing), GPU and TPU steps run the matching variant of it, a step
may be given its own, and the output line names them all. Each test reads the images back from
the compiled IR (task -> component -> executor -> container image), as the KFP backend does.

The CLI runs as a user runs it: ``python -m estflow.pipelines`` from a fresh directory
(``tmp_path``), the example pipelines by their documented path, no ``ESTFLOW_*`` variable
unless the test sets one.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import estflow.dsl as ef
from estflow.pipelines.examples import taxi_gpu
from estflow.pipelines.kubeflow import compiler as kfp_compiler
from estflow.pipelines.kubeflow import images as kfp_images

REPO = Path(__file__).resolve().parents[2]
BUCKET = ("--push-base-path", "gs://estflow-examples/serving_models")
DIGEST = "sha256:" + "ab" * 32
STEPS = ("ingest", "transform", "train", "evaluate", "push")


def _estflow(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """The CLI as a user runs it, from ``cwd`` where ``pipelines/`` holds the examples."""
    if not (cwd / "pipelines").exists():
        (cwd / "pipelines").symlink_to(REPO / "pipelines", target_is_directory=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "ESTFLOW_"))}
    return subprocess.run([sys.executable, "-m", "estflow.pipelines", *args], cwd=cwd,
                          env={**base, **(env or {})}, capture_output=True, text=True,
                          timeout=120)


def task_images(path: Path) -> dict[str, str]:
    """Task name -> its container image, read from the compiled PipelineSpec (tasks sit in
    nested DAGs: the exit handler's, push's condition)."""
    spec = next(yaml.safe_load_all(path.read_text()))
    components = spec["components"]
    executors = spec["deploymentSpec"]["executors"]
    dags = [spec["root"]] + [c for c in components.values() if "dag" in c]
    images = {}
    for dag in dags:
        for name, task in dag["dag"]["tasks"].items():
            component = components[task["componentRef"]["name"]]
            if "executorLabel" in component:
                images[name] = executors[component["executorLabel"]]["container"]["image"]
    return images


def _compile(pipeline, path: Path, **options) -> dict[str, str]:
    compiled = kfp_compiler.compile_pipeline(pipeline, path, **options)
    images = task_images(path)
    # What compile reports is what the IR holds.
    assert {t: i for t, i in compiled.images.items() if t in images} == images
    return images


def _tpu(pipeline):
    train = dataclasses.replace(pipeline.resources["train"], placement_parameters=False,
                                accelerator=ef.Accelerator("tpu-v5-lite-podslice", count=4,
                                                           tpu_topology="2x2"))
    return dataclasses.replace(pipeline, resources={**pipeline.resources, "train": train})


# --- the refusal of the unpublished default ---------------------------------------------------

def test_compile_without_an_image_is_refused_and_says_how_to_publish_one(tmp_path):
    done = _estflow("compile", "pipelines/examples/taxi.py", "-o", "taxi.yaml", *BUCKET,
                    cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("estflow compile: error: Received no image, expected "
                                  "--image REF or the ESTFLOW_IMAGE environment variable")
    assert f"the default {kfp_compiler.DEFAULT_IMAGE} is not published" in done.stderr
    assert "make image IMAGE_REPO=REGISTRY/estflow" in done.stderr
    assert "pipelines/docker/publish-images.yml" in done.stderr
    assert not (tmp_path / "taxi.yaml").exists()


def test_estflow_image_or_the_default_named_explicitly_is_accepted(tmp_path):
    done = _estflow("compile", "pipelines/examples/taxi.py", "-o", "a.yaml", *BUCKET,
                    cwd=tmp_path, env={"ESTFLOW_IMAGE": "registry.example/estflow:0.1.0"})
    assert done.returncode == 0, done.stderr
    assert set(task_images(tmp_path / "a.yaml").values()) == {
        "registry.example/estflow:0.1.0", "registry.example/estflow:0.1.0-slim"}
    # The default reference, named: accepted (a mirror may hold it under that name).
    done = _estflow("compile", "pipelines/examples/taxi.py", "-o", "b.yaml", *BUCKET,
                    "--image", kfp_compiler.DEFAULT_IMAGE, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert task_images(tmp_path / "b.yaml")["train"] == kfp_compiler.DEFAULT_IMAGE


def test_submitting_a_pipeline_file_without_an_image_is_refused(tmp_path):
    """``estflow submit FILE.py`` compiles first: on $ESTFLOW_IMAGE, else refused before any
    request (the host is a closed port: nothing is sent)."""
    done = _estflow("submit", "pipelines/examples/taxi.py", "--host", "http://127.0.0.1:9",
                    *BUCKET, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "expected $ESTFLOW_IMAGE to compile pipelines/examples/taxi.py on, or a file " \
           "compiled first with estflow compile pipelines/examples/taxi.py" in done.stderr


def test_the_slim_image_is_refused_as_the_steps_image(tmp_path):
    with pytest.raises(kfp_compiler.CompileError, match="the -slim image holds neither"):
        kfp_compiler.compile_pipeline(taxi_gpu.pipeline, tmp_path / "p.yaml",
                                      image="r/estflow:1-slim")


# --- CPU, GPU and TPU steps -------------------------------------------------------------------

def test_cpu_steps_run_the_image_and_the_output_line_names_it(tmp_path):
    done = _estflow("compile", "pipelines/examples/taxi.py", "-o", "taxi.yaml", *BUCKET,
                    "--image", "r.example/estflow:1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    images = task_images(tmp_path / "taxi.yaml")
    assert {images[s] for s in (*STEPS, "fingerprint")} == {"r.example/estflow:1"}
    assert images["report"] == "r.example/estflow:1-slim"
    assert ("images r.example/estflow:1 (fingerprint, ingest, transform, train, evaluate, "
            "push), r.example/estflow:1-slim (report)") in done.stdout


def test_the_gpu_example_trains_on_the_gpu_image(tmp_path):
    """The T4 train step of taxi_gpu.py runs ``IMAGE-gpu`` (the CPU image has no CUDA: the
    step would fail at its start, after a GPU node was scaled up); the rest ``IMAGE``."""
    done = _estflow("compile", "pipelines/examples/taxi_gpu.py", "-o", "gpu.yaml",
                    "--image", "r.example/estflow:1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    images = task_images(tmp_path / "gpu.yaml")
    assert images["train"] == "r.example/estflow:1-gpu"
    assert {images[s] for s in STEPS if s != "train"} == {"r.example/estflow:1"}
    assert images["train-placement"] == images["report"] == "r.example/estflow:1-slim"
    assert "r.example/estflow:1-gpu (train)" in done.stdout


@pytest.mark.parametrize("base", ["r/estflow:1", "r/estflow:1-gpu", "r/estflow:1-tpu"])
def test_a_tpu_step_runs_the_tpu_image(tmp_path, base):
    images = _compile(_tpu(taxi_gpu.pipeline), tmp_path / "p.yaml", image=base)
    assert images["train"] == "r/estflow:1-tpu"
    assert images["evaluate"] == base and images["report"] == "r/estflow:1-slim"


def test_multi_worker_replicas_run_the_gpu_image_and_the_submitter_the_base(tmp_path):
    pipeline = dataclasses.replace(taxi_gpu.pipeline, run_config=ef.RunConfig(
        cluster=ef.Cluster(workers=2, shared_dir="gs://bucket/shared")),
        resources={**taxi_gpu.pipeline.resources, "train": dataclasses.replace(
            taxi_gpu.pipeline.resources["train"], placement_parameters=False)})
    compiled = kfp_compiler.compile_pipeline(pipeline, tmp_path / "p.yaml", image="r/e:1")
    assert task_images(compiled.path)["train"] == "r/e:1"
    assert compiled.images["train-replicas"] == "r/e:1-gpu"
    assert "'--image', 'r/e:1-gpu'" in compiled.path.read_text()


# --- per-step overrides, digests ------------------------------------------------------------

def test_step_image_overrides_one_step(tmp_path):
    done = _estflow("compile", "pipelines/examples/taxi_gpu.py", "-o", "gpu.yaml",
                    "--image", "r/estflow:1", "--step-image", "train=r/custom-cuda:7",
                    "--step-image", "evaluate=r/estflow:1-gpu", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    images = task_images(tmp_path / "gpu.yaml")
    assert (images["train"], images["evaluate"]) == ("r/custom-cuda:7", "r/estflow:1-gpu")
    assert images["transform"] == "r/estflow:1"


@pytest.mark.parametrize("option, expected", [
    ("trian=r/x:1", "expected step names, some of ['ingest', 'transform', 'train', "
                    "'evaluate', 'push']. Received: ['trian']"),
    ("train", "expected STEP=IMAGE, such as train=REGISTRY/estflow:VERSION-gpu. "
              "Received: --step-image 'train'"),
])
def test_a_bad_step_image_is_refused_naming_it(tmp_path, option, expected):
    done = _estflow("compile", "pipelines/examples/taxi_gpu.py", "-o", "gpu.yaml",
                    "--image", "r/estflow:1", "--step-image", option, cwd=tmp_path)
    assert done.returncode == 2 and expected in done.stderr, done.stderr
    assert not (tmp_path / "gpu.yaml").exists()


def test_a_digest_pinned_image_needs_the_gpu_step_image_named(tmp_path):
    """A digest names one image: its -gpu variant cannot be derived, so the GPU step's image
    must be given; the digests then flow into the IR unchanged."""
    base = f"r.example/estflow@{DIGEST}"
    done = _estflow("compile", "pipelines/examples/taxi_gpu.py", "-o", "gpu.yaml",
                    "--image", base, cwd=tmp_path)
    assert done.returncode == 2
    assert ("Received resources['train'] with a GPU accelerator and the image "
            f"{base} (pinned by digest), whose -gpu variant cannot be derived") in done.stderr
    assert "--step-image train=REPO@sha256:DIGEST" in done.stderr
    gpu = "r.example/estflow@sha256:" + "cd" * 32
    done = _estflow("compile", "pipelines/examples/taxi_gpu.py", "-o", "gpu.yaml",
                    "--image", base, "--step-image", f"train={gpu}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    images = task_images(tmp_path / "gpu.yaml")
    assert images["train"] == gpu
    assert {i for t, i in images.items() if t != "train"} == {base}  # no -slim derivable


@pytest.mark.parametrize("image, kind, expected", [
    ("r/e:1", "gpu", "r/e:1-gpu"),
    ("r/e:1-slim", "tpu", "r/e:1-tpu"),
    ("registry:5000/e:1.2.3", "gpu", "registry:5000/e:1.2.3-gpu"),
    ("registry:5000/e", "gpu", None),  # no tag
    (f"r/e@{DIGEST}", "tpu", None),
    (f"r/e:1@{DIGEST}", "gpu", None),  # tag and digest: the digest wins on pull
])
def test_variant_for(image, kind, expected):
    assert kfp_images.variant_for(image, kind) == expected


# --- publishing: the workflow file, and a push to a registry on loopback ------------------------

WORKFLOW = REPO / "pipelines" / "docker" / "publish-images.yml"


def _workflow_steps() -> list[dict]:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as True
    assert set(triggers) == {"push", "workflow_dispatch"}
    assert workflow["permissions"] == {"contents": "read", "packages": "write"}
    (job,) = workflow["jobs"].values()
    assert "IMAGE_REPO" in job["env"]
    return job["steps"]


def test_the_publish_workflow_builds_with_make_targets_that_exist_and_pushes_four_tags():
    steps = _workflow_steps()
    targets = {line.split(":", 1)[0] for line in (REPO / "Makefile").read_text().splitlines()
               if line[:1].isalpha() and ":" in line and "=" not in line.split(":", 1)[0]}
    makes = [line.split()[1] for step in steps for line in step.get("run", "").splitlines()
             if line.strip().startswith("make ")]
    assert makes == ["image"] and set(makes) <= targets
    (push,) = [s for s in steps if "docker push" in s.get("run", "")]
    assert "for variant in cpu gpu tpu slim" in push["run"]
    assert any(s.get("uses", "").startswith("docker/login-action@") for s in steps)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def registry(tmp_path):
    """A Distribution registry (Debian's docker-registry) on 127.0.0.1, from a config this
    test writes; skipped where it or a Docker engine is missing (CI installs both)."""
    import shutil
    import time
    import urllib.request

    if shutil.which("docker-registry") is None or subprocess.run(
            ["docker", "info"], capture_output=True).returncode != 0:
        pytest.skip("needs docker-registry (apt-get install docker-registry) and a Docker "
                    "engine")
    port = _free_port()
    config = tmp_path / "registry.yml"
    config.write_text(yaml.safe_dump({
        "version": 0.1, "log": {"level": "error"},
        "storage": {"filesystem": {"rootdirectory": str(tmp_path / "storage")}},
        "http": {"addr": f"127.0.0.1:{port}"}}))
    server = subprocess.Popen(["docker-registry", "serve", str(config)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(100):  # until it answers (a bound on attempts, not a timed assertion)
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2)
                break
            except OSError:
                assert server.poll() is None, server.stderr.read().decode()
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)
        server.stderr.close()


def test_the_workflow_pushes_to_a_registry_and_its_digests_flow_into_the_ir(registry,
                                                                             tmp_path):
    """The workflow's push step runs verbatim against a registry on loopback, on four tiny
    images (``FROM scratch``, one file each) tagged as ``make image`` tags the real ones; the
    ``estflow compile`` line it prints, run as printed, pins those digests in the IR."""
    import re
    import tomllib
    import urllib.request

    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    repo = f"{registry}/estflow"
    tags = {v: f"{repo}:{version}{'' if v == 'cpu' else '-' + v}"
            for v in ("cpu", "gpu", "tpu", "slim")}
    context = tmp_path / "context"
    context.mkdir()
    (context / "Dockerfile").write_text("FROM scratch\nCOPY variant.txt /\n")
    try:
        for variant, tag in tags.items():
            (context / "variant.txt").write_text(variant)
            subprocess.run(["docker", "build", "-q", "-t", tag, str(context)], check=True,
                           capture_output=True)
        (push,) = [s["run"] for s in _workflow_steps() if "docker push" in s.get("run", "")]
        summary = tmp_path / "summary.md"
        done = subprocess.run(["bash", "-c", push], cwd=REPO, capture_output=True, text=True,
                              env={**os.environ, "IMAGE_REPO": repo,
                                   "GITHUB_STEP_SUMMARY": str(summary)})
        assert done.returncode == 0, done.stderr
    finally:
        subprocess.run(["docker", "rmi", "-f", *tags.values()], capture_output=True)
    pushed = dict(re.findall(rf"^(\S+) -> ({re.escape(repo)}@sha256:\w+)$", summary.read_text(),
                             re.MULTILINE))  # tag -> reference by digest
    assert pushed.keys() == set(tags.values())
    refs = {variant: pushed[tag] for variant, tag in tags.items()}
    assert len(set(refs.values())) == 4  # four different images, four digests
    for reference in refs.values():  # each is in the registry under its digest
        digest = reference.split("@", 1)[1]
        request = urllib.request.Request(
            f"http://{registry}/v2/estflow/manifests/{digest}", method="HEAD",
            headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json, "
                               "application/vnd.oci.image.manifest.v1+json"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.headers["Docker-Content-Digest"] == digest
    text = re.sub(r"\\\n\s*", " ", summary.read_text())
    (line,) = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("estflow ")]
    argv = line.replace("PIPELINE", "pipelines/examples/taxi_gpu.py", 1).split()
    done = _estflow(*argv[1:], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    images = task_images(tmp_path / "PIPELINE.yaml")
    assert images["train"] == refs["gpu"]
    assert images["report"] == images["train-placement"] == refs["slim"]
    assert {images[s] for s in STEPS if s != "train"} == {refs["cpu"]}

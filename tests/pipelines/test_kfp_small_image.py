"""The report and placement tasks import neither TensorFlow nor Beam: they run the small image
(`pipelines/docker/Dockerfile.slim`), not the ~3.7 GB step image."""

import pytest
import yaml

from estflow.pipelines.examples import taxi_gpu
from estflow.pipelines.kubeflow import compiler as kfp_compiler


@pytest.mark.parametrize("image, small", [
    ("ghcr.io/estflow/estflow:0.1.0", "ghcr.io/estflow/estflow:0.1.0-slim"),
    ("ghcr.io/estflow/estflow:0.1.0-gpu", "ghcr.io/estflow/estflow:0.1.0-slim"),
    ("ghcr.io/estflow/estflow:0.1.0-tpu", "ghcr.io/estflow/estflow:0.1.0-slim"),
    ("ghcr.io/estflow/estflow:0.1.0-slim", "ghcr.io/estflow/estflow:0.1.0-slim"),
    ("registry:5000/estflow", "registry:5000/estflow"),  # no tag: nothing to derive
    ("ghcr.io/estflow/estflow@sha256:" + "a" * 64, "ghcr.io/estflow/estflow@sha256:" + "a" * 64),
])
def test_the_small_image_is_derived_from_the_tag(image, small):
    assert kfp_compiler.small_image_for(image) == small


def _images(path) -> dict[str, str]:
    spec = next(yaml.safe_load_all(path.read_text()))
    return {name: executor["container"]["image"]
            for name, executor in spec["deploymentSpec"]["executors"].items()}


def test_report_and_placement_tasks_run_the_small_image(tmp_path):
    path = tmp_path / "p.yaml"
    kfp_compiler.compile_pipeline(taxi_gpu.pipeline, path, image="r/estflow:1")
    images = _images(path)
    small = {n for n, i in images.items() if i == "r/estflow:1-slim"}
    assert small and all("report" in n or "placement" in n for n in small)
    # The other tasks run the image, the GPU train step its -gpu variant (test_kfp_images.py).
    steps = {n: i for n, i in images.items() if n not in small}
    assert steps and set(steps.values()) == {"r/estflow:1", "r/estflow:1-gpu"}
    kfp_compiler.compile_pipeline(taxi_gpu.pipeline, path, image="r/estflow:1",
                                  small_image="r/tiny:2")
    assert {i for n, i in _images(path).items() if n in small} == {"r/tiny:2"}

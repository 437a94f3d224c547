"""The GPU image (``pipelines/docker/Dockerfile.gpu``, ``make image-gpu``), checked where it was
built: TensorFlow in it is the CUDA build, the CUDA libraries of ``tensorflow[and-cuda]`` (the
wheels of ``requirements-gpu.lock``) are installed and load, the estflow entry points start, and
without a GPU the train step of a GPU pipeline refuses to train on the CPU.

Skipped unless the image already exists locally: ``make image`` (what CI builds) does not build
it, since its CUDA wheels are about 3 GB more to download and the image is about 7.6 GB. No test
here needs a GPU (they run where none is: TensorFlow lists none); training on 1 and on 2 GPUs is
``docs/pages/kubeflow/images.md``'s "GPU image" section.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from tests.pipelines import images_fixture

GPU_IMAGE = images_fixture.IMAGE + "-gpu"
LOCK = images_fixture.REPO / "pipelines" / "docker" / "requirements-gpu.lock"
# The libraries TensorFlow opens from the nvidia/*/lib folders of tensorflow[and-cuda]'s wheels
# (its libraries' RUNPATH names them), one per wheel. libcuda (the driver) is the node's.
CUDA_LIBRARIES = {
    "cublas": "libcublas.so.12", "cuda_cupti": "libcupti.so.12",
    "cuda_nvrtc": "libnvrtc.so.12", "cuda_runtime": "libcudart.so.12",
    "cudnn": "libcudnn.so.9", "cufft": "libcufft.so.11", "curand": "libcurand.so.10",
    "cusolver": "libcusolver.so.11", "cusparse": "libcusparse.so.12", "nccl": "libnccl.so.2",
    "nvjitlink": "libnvJitLink.so.12",
}


def _gpu_image_built() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "image", "inspect", GPU_IMAGE], capture_output=True,
                              timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not _gpu_image_built(),
                       reason=f"the GPU image {GPU_IMAGE} is not built here (CI does not build "
                              "it): `make image-gpu` builds it"),
]

# What the image reports about itself, as JSON on the last line.
PROBE = r"""
import ctypes, glob, json, os
from importlib import metadata
import tensorflow as tf
import nvidia

root = list(nvidia.__path__)[0]
loaded = {}
for folder, name in json.loads(os.environ["CUDA_LIBRARIES"]).items():
    path = os.path.join(root, folder, "lib", name)
    try:
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        loaded[folder] = "ok"
    except OSError as error:
        loaded[folder] = str(error)
print(json.dumps({
    "built_with_cuda": tf.test.is_built_with_cuda(),
    "build_info": dict(tf.sysconfig.get_build_info()),
    "gpus": len(tf.config.list_physical_devices("GPU")),
    "loaded": loaded,
    "folders": sorted(os.path.basename(os.path.dirname(p))
                      for p in glob.glob(os.path.join(root, "*", "lib"))),
    "nvidia": {d.metadata["Name"].lower(): d.version for d in metadata.distributions()
               if d.metadata["Name"].lower().startswith("nvidia-")},
    "uid": os.getuid(),
    "accelerator": os.environ.get("ESTFLOW_ACCELERATOR"),
}))
"""


def _run(*command: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``command`` in a container of the GPU image, without network, as its user."""
    flags = [f"--env={k}={v}" for k, v in (env or {}).items()]
    return subprocess.run(["docker", "run", "--rm", "--network", "none", *flags, GPU_IMAGE,
                           *command], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def probe() -> dict:
    done = _run("python3", "-c", PROBE, env={"CUDA_LIBRARIES": json.dumps(CUDA_LIBRARIES)})
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_tensorflow_in_the_gpu_image_is_the_cuda_build(probe):
    assert probe["built_with_cuda"] is True
    info = probe["build_info"]
    assert info["is_cuda_build"] is True and info["is_rocm_build"] is False
    assert info["cuda_version"].startswith("12.") and info["cudnn_version"] == "9"
    assert probe["gpus"] == 0  # no GPU where these tests run: training on one is not checked
    assert probe["uid"] == 1000 and probe["accelerator"] == "gpu"


def test_the_cuda_libraries_of_the_lock_are_installed_and_load(probe):
    """The same TensorFlow wheel is CUDA-built in the CPU image too: what makes this the GPU
    image is the CUDA wheels, which must be the locked versions and load (no driver needed,
    except by cuDNN's runtime-compiled engines, which the node's libcuda serves)."""
    lock = dict(line.split("==") for line in LOCK.read_text().splitlines()
                if line and not line.startswith("#"))
    assert probe["nvidia"] == lock
    assert probe["loaded"] == dict.fromkeys(CUDA_LIBRARIES, "ok")
    assert set(CUDA_LIBRARIES) <= set(probe["folders"])


def test_the_entry_points_start():
    done = _run("estflow", "--help")
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.startswith("usage: estflow") and "compile" in done.stdout
    done = _run("python3", "-m", "estflow.components.train", "--help")
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.startswith("usage: estflow.components.train")
    # what every KFP task runs, and the CPU image's imports (tests/pipelines/test_images.py)
    done = _run("python3", "-c", "import kfp.dsl.executor_main, tensorflow, apache_beam, boto3, "
                "google.cloud.storage, estflow.components.train, estflow.pipelines.kubeflow.compiler")
    assert done.returncode == 0, done.stderr[-4000:]


def test_without_a_gpu_the_train_step_of_a_gpu_pipeline_refuses_to_train():
    """The train step's accelerator check (components/_runtime/accelerators.py) in this image:
    taxi_gpu.py's train step declares a T4 and TensorFlow sees none, so it stops at its start
    instead of training on the CPU."""
    done = _run("python3", "-c", "import os\n"
                "from estflow.components._runtime import accelerators\n"
                "from estflow.pipelines.examples import taxi_gpu\n"
                "accelerators.check(taxi_gpu.pipeline, os.environ)\n")
    assert done.returncode != 0
    assert re.search(r"AcceleratorError: the pipeline declares 1 nvidia-tesla-t4, but "
                     r"TensorFlow sees 0 GPU\(s\)", done.stderr), done.stderr[-4000:]

"""Fail fast when a step asked for an accelerator its process cannot use.

TensorFlow falls back to the CPU silently: a GPU step in a CPU-only image, or a TPU picked at
run time (a placement parameter) on the CUDA image, would train for hours on the CPU and look
healthy. The train step checks at its start (:func:`check`), in estflow's images and KFP pods
only (a local ``estflow run`` of a pipeline declared for GPU nodes trains on this machine's
CPU, as intended):

* what the process should have: the accelerator the pod was granted (the device plugin's
  evidence: ``NVIDIA_VISIBLE_DEVICES`` with GPU ids, TPU device files ``/dev/accel*`` or
  ``/dev/vfio/N``), else the one the pipeline spec declares for this process (the train
  step's, or the cluster's ps/evaluator resources for those tasks);
* what it has: the image's kind (``ESTFLOW_ACCELERATOR``: ``cpu``, ``gpu``, ``tpu``), the GPUs
  TensorFlow sees, whether libtpu is installed.
"""

from __future__ import annotations

import dataclasses
import glob
import importlib.util
import json
from collections.abc import Callable
from collections.abc import Mapping

from estflow.dsl.pipeline import Pipeline
from estflow.dsl.resources import Resources

__all__ = ["AcceleratorError", "Devices", "expected_accelerator", "problem", "check"]

IMAGE_ENV = "ESTFLOW_ACCELERATOR"
_NO_GPU_IDS = ("", "void", "none", "all")


class AcceleratorError(RuntimeError):
    """The step asked for an accelerator this process cannot use."""


@dataclasses.dataclass(frozen=True)
class Devices:
    """What this process has: the image's kind, the GPUs TensorFlow sees, libtpu."""

    image_kind: str | None
    gpus: int
    libtpu: bool


def _declared(pipeline: Pipeline, task_type: str | None, step: str) -> Resources:
    resources = pipeline.resources.get(step, Resources())
    cluster = pipeline.run_config.cluster
    if cluster is not None and task_type == "ps":
        return cluster.ps_resources or Resources()
    if cluster is not None and task_type == "evaluator" and cluster.evaluator_resources:
        return cluster.evaluator_resources
    return resources


def expected_accelerator(pipeline: Pipeline, env: Mapping[str, str],
                         device_files: tuple[str, ...] = (), step: str = "train",
                         ) -> tuple[str | None, int, str]:
    """(kind ``"gpu"``/``"tpu"``/None, count, why) this process should have."""
    ids = env.get("NVIDIA_VISIBLE_DEVICES", "").strip().lower()
    if ids not in _NO_GPU_IDS:
        return "gpu", len(ids.split(",")), f"the pod was granted GPUs {ids}"
    if device_files:
        return "tpu", len(device_files), f"the pod has TPU devices {', '.join(device_files)}"
    task_type = (json.loads(env.get("TF_CONFIG") or "{}").get("task") or {}).get("type")
    accelerator = _declared(pipeline, task_type, step).accelerator
    if accelerator is None:
        return None, 0, "no accelerator is declared"
    return (accelerator.kind, accelerator.count,
            f"the pipeline declares {accelerator.count} {accelerator.type}")


def problem(kind: str | None, count: int, why: str, devices: Devices) -> str | None:
    """What is wrong (None: the process can use what it should have)."""
    if kind is None:
        return None
    image = devices.image_kind
    if image and image != kind:
        return (f"{why}, but this is estflow's {image} image: use the {kind} image "
                f"(pipelines/docker/Dockerfile.{kind}), else TensorFlow trains on the CPU")
    if kind == "gpu" and devices.gpus < max(count, 1):
        return (f"{why}, but TensorFlow sees {devices.gpus} GPU(s): is the NVIDIA driver "
                "mounted (GPU node) and is this the GPU image?")
    if kind == "tpu" and not devices.libtpu:
        return f"{why}, but libtpu is not installed: use estflow's TPU image"
    return None


def check(pipeline: Pipeline, env: Mapping[str, str], step: str = "train",
          visible_gpus: Callable[[], int] | None = None) -> None:
    """Raise :class:`AcceleratorError` when the step cannot use its accelerator (see the
    module docstring); does nothing outside estflow's images and KFP pods."""
    if not (env.get(IMAGE_ENV) or env.get("KFP_POD_NAME")):
        return
    device_files = tuple(sorted(glob.glob("/dev/accel[0-9]*") + glob.glob("/dev/vfio/[0-9]*")))
    kind, count, why = expected_accelerator(pipeline, env, device_files, step)
    if kind is None:
        return
    gpus = (visible_gpus or _tensorflow_gpus)() if kind == "gpu" else 0
    devices = Devices(env.get(IMAGE_ENV) or None, gpus,
                      importlib.util.find_spec("libtpu") is not None)
    found = problem(kind, count, why, devices)
    if found:
        raise AcceleratorError(found)


def _tensorflow_gpus() -> int:
    import tensorflow as tf  # the train step has imported it already

    return len(tf.config.list_physical_devices("GPU"))

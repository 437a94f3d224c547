"""The train step fails fast when an accelerator was asked for and its process cannot use it
(TensorFlow would silently train on the CPU): a TPU picked at run time on the CUDA image, a GPU
step on the CPU image, a GPU image without a visible GPU."""

import dataclasses

import pytest

import estflow.dsl as ef
from estflow.components._runtime import accelerators as acc
from estflow.components.train import __main__ as train
from estflow.pipelines.examples import taxi

TPU = ef.Accelerator("tpu-v5-lite-podslice", count=4, tpu_topology="2x2")
T4 = ef.Accelerator("nvidia-tesla-t4", count=2)


def _pipeline(accelerator, cluster=None):
    return dataclasses.replace(taxi.pipeline,
                               resources={"train": ef.Resources(accelerator=accelerator)},
                               run_config=ef.RunConfig(cluster=cluster))


def _problem(pipeline, env=None, devices=(), image=None, gpus=0, libtpu=False):
    kind, count, why = acc.expected_accelerator(pipeline, env or {}, devices)
    return acc.problem(kind, count, why, acc.Devices(image, gpus, libtpu))


def test_a_tpu_picked_at_run_time_on_the_gpu_image_fails():
    """The spec declares a GPU; a placement parameter put the pod on a TPU node."""
    found = _problem(_pipeline(T4), devices=("/dev/accel0", "/dev/accel1"), image="gpu",
                     gpus=0)
    assert "TPU devices /dev/accel0" in found and "estflow's gpu image" in found


def test_a_declared_gpu_on_the_cpu_image_or_without_a_visible_gpu_fails():
    assert "estflow's cpu image" in _problem(_pipeline(T4), image="cpu")
    assert "TensorFlow sees 1 GPU(s)" in _problem(_pipeline(T4), image="gpu", gpus=1)
    found = _problem(_pipeline(None), env={"NVIDIA_VISIBLE_DEVICES": "GPU-1a2b"}, image="gpu")
    assert "granted GPUs gpu-1a2b" in found


def test_a_tpu_needs_libtpu():
    assert "libtpu is not installed" in _problem(_pipeline(TPU), image="tpu")
    assert _problem(_pipeline(TPU), image="tpu", libtpu=True) is None


def test_what_can_be_used_passes():
    assert _problem(_pipeline(None), image="gpu") is None  # a CPU step on the GPU image
    assert _problem(_pipeline(T4), image="gpu", gpus=2) is None
    assert _problem(_pipeline(T4), env={"NVIDIA_VISIBLE_DEVICES": "all"}, image="gpu",
                    gpus=2) is None


def test_a_parameter_server_task_takes_the_ps_resources():
    cluster = ef.Cluster(workers=1, parameter_servers=1, job_kind="tfjob",
                         ps_resources=ef.Resources(cpu_request="2"))
    env = {"TF_CONFIG": '{"cluster": {}, "task": {"type": "ps", "index": 0}}'}
    assert _problem(_pipeline(T4, cluster), env=env, image="gpu", gpus=0) is None


def test_only_in_estflows_images_and_kfp_pods():
    acc.check(_pipeline(TPU), {})  # `estflow run` on this machine: the CPU, as intended
    with pytest.raises(acc.AcceleratorError):
        acc.check(_pipeline(T4), {"KFP_POD_NAME": "p"}, visible_gpus=lambda: 0)


def test_the_train_step_fails_at_its_start(tmp_path, monkeypatch, capsys):
    spec = tmp_path / "pipeline.json"
    spec.write_text(_pipeline(TPU).to_json())
    monkeypatch.setenv("ESTFLOW_ACCELERATOR", "gpu")
    code = train.main(["--spec", str(spec), "--transformed", str(tmp_path / "none"),
                       "--model", str(tmp_path / "model")])
    assert code == 1
    assert "estflow's gpu image: use the tpu image" in capsys.readouterr().err
    assert not (tmp_path / "model").exists()  # nothing started

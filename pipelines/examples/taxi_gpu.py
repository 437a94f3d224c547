"""The Chicago taxi pipeline (:mod:`estflow.pipelines.examples.taxi`) with Kubeflow resources:
the transform step gets 2 CPUs and 8 GiB, training runs on a T4 GPU node pool, ingest retries,
push reads a serving token from a Kubernetes Secret, and models are pushed to a bucket
(:data:`MODELS`): a Kubeflow task's own disk goes with its pod, so a push target there would
be lost, and every later run would find no baseline to compare with.

Compile it with the images you published (``make image IMAGE_BASE=hub IMAGE_REPO=REGISTRY/estflow``, then
``docker push``; ``docs/pages/kubeflow/publishing-images.md``): the train step declares a T4, so
its task runs the GPU variant ``REGISTRY/estflow:0.1.0-gpu`` (the CPU image has no CUDA), the
other steps ``REGISTRY/estflow:0.1.0``, the report and placement tasks ``-slim``; the compile
line names each. Then submit the compiled file (``estflow submit FILE.py`` compiles on
``$ESTFLOW_IMAGE``)::

    estflow compile pipelines/examples/taxi_gpu.py -o taxi_gpu.yaml \\
        --image REGISTRY/estflow:0.1.0
    estflow submit taxi_gpu.yaml --host URL

The accelerator and node pool of training are run parameters, so one compiled YAML trains on
any GPU or on CPUs, chosen per run; its image is chosen at compile time, so for a TPU compile
the train step onto the TPU image (``--step-image`` gives one step its image; with an image
pinned by digest, ``--image REGISTRY/estflow@sha256:...``, it is required for the train step,
since a digest has no ``-gpu`` variant)::

    estflow compile pipelines/examples/taxi_gpu.py -o taxi_tpu.yaml \\
        --image REGISTRY/estflow:0.1.0 --step-image train=REGISTRY/estflow:0.1.0-tpu
    estflow submit taxi_tpu.yaml --host URL \\
        --param train_accelerator_type=tpu-v5-lite-podslice --param train_tpu_topology=2x2 \\
        --param train_accelerator_count=4 --param train_node_pool=tpu-pool

``estflow run`` on this machine ignores the resources: it runs the same steps as taxi.py.
"""

import dataclasses

import estflow.dsl as ef
from estflow.pipelines.examples import taxi

RESOURCES = {
    "ingest": ef.Resources(retries=3, retry_backoff="30s"),
    "transform": ef.Resources(cpu_request="2", memory_request="8Gi"),
    "train": ef.Resources(
        cpu_request="4", memory_request="16Gi",
        accelerator=ef.Accelerator("nvidia-tesla-t4", count=1),
        node_pool="gpu-pool",
        placement_parameters=True,
        timeout_seconds=4 * 3600,
    ),
    "push": ef.Resources(
        secrets_as_env=(ef.SecretEnv("serving-credentials",
                                     key_to_env={"token": "SERVING_TOKEN"}),),
    ),
}

# Where the models go: a bucket the push (and evaluate) tasks' service account can write (read).
MODELS = "gs://estflow-examples/serving_models"

pipeline = dataclasses.replace(taxi.pipeline, name="chicago-taxi-gpu", resources=RESOURCES,
                               push=dataclasses.replace(taxi.pipeline.push, base_path=MODELS))

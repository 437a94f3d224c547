"""Which container image each task of a compiled pipeline runs.

``make image IMAGE_BASE=hub IMAGE_REPO=REPO`` builds four images from ``pipelines/docker/``,
tagged ``REPO:VERSION`` (CPU), ``REPO:VERSION-gpu``, ``REPO:VERSION-tpu`` and
``REPO:VERSION-slim`` (on a machine without Docker Hub, ``make image`` builds the CPU and slim
ones from a local base and ``make image-gpu`` the GPU one).
A pipeline is compiled with one base image (``--image REPO:VERSION``); each task then runs:

* a step whose ``Resources`` declare a GPU (``nvidia-*``) or TPU (``tpu-*``) accelerator: the
  matching variant, the base tag with ``-gpu`` or ``-tpu`` (the CPU image has no CUDA, so a GPU
  step there would fail at its start, after a GPU node was scaled up for it);
* the report and placement tasks (no TensorFlow, no Beam): ``-slim`` (:func:`small_image_for`);
* every other step: the base image;
* a step named in ``step_images`` (``--step-image STEP=REF``): that image, whatever it declares;
  a user step declaring ``image=`` is named there with it (unless ``--step-image`` names it).

A reference pinned by digest (``REPO@sha256:...``) or without a tag has no derivable variant:
a digest names one image, so an accelerated step then needs its own ``--step-image``.

``estflow compile`` refuses to compile on :data:`DEFAULT_IMAGE` unless it is asked for by name
(``--image`` or :data:`ENV`): nothing publishes it, so each task would fail to pull it.
"""

from __future__ import annotations

from collections.abc import Mapping

from estflow.pipelines.kubeflow import tasks as kfp_tasks
from estflow.pipelines.kubeflow import user_steps
from estflow.pipelines.plan import Plan

__all__ = ["DEFAULT_IMAGE", "ENV", "VARIANTS", "ImageError", "base_image", "small_image_for",
           "variant_for", "accelerators", "step_images", "task_images", "parse_step_images",
           "PUBLISH_HINT"]

# The one place the image's version is written; tests check it matches the package version.
DEFAULT_IMAGE = "ghcr.io/estflow/estflow:0.1.0"

# The environment variable naming the estflow image: the compile default here, and set inside
# each estflow image to its own reference (its Beam workers' SDK image).
ENV = "ESTFLOW_IMAGE"

# Accelerator kind (dsl.resources.Accelerator.kind) -> the tag suffix of its image variant.
VARIANTS: Mapping[str, str] = {"gpu": "-gpu", "tpu": "-tpu"}
_SUFFIXES = ("-gpu", "-tpu", "-slim")

PUBLISH_HINT = ("build and push the images to a registry your cluster pulls from "
                "(make image IMAGE_REPO=REGISTRY/estflow, then docker push each of "
                "REGISTRY/estflow:VERSION, -gpu, -tpu and -slim; or copy "
                "pipelines/docker/publish-images.yml to .github/workflows/), then compile with "
                "--image REGISTRY/estflow:VERSION or set ESTFLOW_IMAGE")


class ImageError(ValueError):
    """An image reference, or the choice of one for a step, is invalid."""


def base_image(given: str | None, environ: Mapping[str, str],
               expected: str = f"--image REF or the {ENV} environment variable") -> str:
    """The base image a compile asked for: ``given`` (``--image``), else ``environ``'s
    :data:`ENV`; ImageError (saying ``expected``) when neither names one, since the default
    reference (:data:`DEFAULT_IMAGE`) is published by nothing (naming it explicitly is
    accepted: a registry mirror may hold it)."""
    image = given if given is not None else environ.get(ENV) or None
    if image is None:
        raise ImageError(f"Received no image, expected {expected}: the default "
                         f"{DEFAULT_IMAGE} is not published, so every task would fail to "
                         f"pull it; {PUBLISH_HINT}")
    return image


def _tag(image: str) -> str | None:
    """The tag of ``image``, None when it is pinned by digest or has none."""
    name = image.rsplit("/", 1)[-1]
    if "@" in image or ":" not in name:
        return None
    return name.rsplit(":", 1)[1]


def _untagged(image: str) -> str:
    """``image`` without a variant suffix (``-gpu``, ``-tpu``, ``-slim``) on its tag."""
    for suffix in _SUFFIXES:
        if image.endswith(suffix):
            return image.removesuffix(suffix)
    return image


def small_image_for(image: str) -> str:
    """The small image beside ``image`` (``make image`` tags it ``REPO:VERSION-slim``): the
    same tag with ``-slim``. An image pinned by digest, or without a tag, has no derivable
    sibling: its tasks all run ``image`` (give ``small_image`` to choose one)."""
    if _tag(image) is None:
        return image
    return f"{_untagged(image)}-slim"


def variant_for(image: str, kind: str) -> str | None:
    """The ``kind`` (``"gpu"``, ``"tpu"``) variant of base ``image``: its tag with the kind's
    suffix (a ``-gpu``/``-tpu``/``-slim`` suffix already there replaced); None when ``image``
    is pinned by digest or has no tag."""
    if _tag(image) is None:
        return None
    return f"{_untagged(image)}{VARIANTS[kind]}"


def accelerators(plan: Plan) -> dict[str, str]:
    """Step -> accelerator kind (``"gpu"``, ``"tpu"``) of ``plan``'s steps declaring one."""
    names = {s.name for s in plan.steps}
    return {step: r.accelerator.kind
            for step, r in user_steps.declared_resources(plan.pipeline).items()
            if r.accelerator is not None and step in names}


def step_images(image: str, accelerators: Mapping[str, str],
                overrides: Mapping[str, str]) -> dict[str, str]:
    """Step name -> image of each step that does not run ``image``: the given ``overrides``,
    and the variant of each step in ``accelerators`` (step -> accelerator kind) not among them.

    Raises:
        ImageError: ``image`` is the slim one (no TensorFlow), or an accelerated step's
            variant cannot be derived from ``image`` (pinned by digest, or no tag) and no
            override names its image.
    """
    if _tag(image) is not None and image.endswith("-slim"):
        raise ImageError(f"Received an invalid value for `image`, expected an image the steps "
                         f"run in (TensorFlow and Beam): the -slim image holds neither and runs "
                         f"only the report and placement tasks (--small-image). "
                         f"Received: image={image!r}")
    images = {}
    for step, kind in accelerators.items():
        if step in overrides:
            continue
        variant = variant_for(image, kind)
        if variant is None:
            how = "pinned by digest" if "@" in image else "without a tag"
            raise ImageError(
                f"Received resources[{step!r}] with a {kind.upper()} accelerator and the image "
                f"{image} ({how}), whose {VARIANTS[kind]} variant cannot be derived (a digest "
                f"names one image); expected the {kind.upper()} image for the {step} step: "
                f"--step-image {step}=REPO@sha256:DIGEST (step_images={{{step!r}: ...}}), the "
                f"digest of REPO:VERSION{VARIANTS[kind]}")
        images[step] = variant
    images.update(overrides)
    return images


def task_images(plan: Plan, image: str, small_image: str, step_images: Mapping[str, str],
                tfjob: str | None = None) -> dict[str, str]:
    """Task -> the image it runs, in the order the tasks run: fingerprint, the steps, the
    placement tasks, report. The ``tfjob`` step's task submits a job and runs ``image``; its
    replicas (``<step>-replicas``) run the step's image."""
    images = {plan.fingerprint.name: image} if plan.fingerprint is not None else {}
    for step in plan.steps:
        images[step.name] = step_images.get(step.name, image)
        if step.name == tfjob:
            images[step.name], images[f"{step.name}-replicas"] = image, images[step.name]
    images.update({kfp_tasks.placement_task_name(step): small_image
                   for step, r in user_steps.declared_resources(plan.pipeline).items()
                   if r.placement_parameters})
    return {**images, kfp_tasks.REPORT: small_image}


def parse_step_images(values: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``STEP=REF`` options (``--step-image``) as step -> image, each step given once (the
    compiler checks the names are the pipeline's steps); ImageError names the option that is
    not of that form."""
    images: dict[str, str] = {}
    for value in values:
        step, sep, ref = value.partition("=")
        if not sep or not step or not ref or any(c.isspace() for c in value):
            raise ImageError(f"Received an invalid value for `--step-image`, expected "
                             f"STEP=IMAGE, such as train=REGISTRY/estflow:VERSION-gpu. "
                             f"Received: --step-image {value!r}")
        if step in images:
            raise ImageError(f"Received --step-image {step}= twice, expected one image per "
                             f"step. Received: {images[step]!r} and {ref!r}")
        images[step] = ref
    return images

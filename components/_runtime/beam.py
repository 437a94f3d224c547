"""Beam pipelines for the preprocessing steps: the step's Beam options in, a pipeline out.

Without ``--runner`` (or with ``FnApiRunner`` / ``DirectRunner``) the pipeline runs on an
explicit in-memory FnApiRunner: deterministic, offline (Beam's default DirectRunner would
first try to download the Prism runner), and on few cores faster than multi-process running.
Any other runner (``DataflowRunner``, ``FlinkRunner``, ``SparkRunner``, ``PortableRunner``) is
Beam's, configured by the same options; ``estflow preprocess`` checks them before starting.

A remote runner's workers run elsewhere (:func:`resolve_io`): they read and write each artifact
at its remote URI, never at the task's local path (under KFP ``/gcs/...``, ``/minio/...``, which
only the task's pod sees), and they run estflow's image as their SDK container, which has
estflow, tf.Transform and the user's code (``--sdk_container_image`` on Dataflow,
``--environment_type=DOCKER --environment_config=IMAGE`` on the portable runners), unless the
options choose the workers' environment themselves.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import shlex
import sys
import traceback
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

from estflow.components._runtime import beam_signatures
from estflow.components._runtime import entry

__all__ = ["LOCAL_RUNNERS", "IMAGE_ENV", "BeamIO", "BeamLocationError", "LocalOptions",
           "new_pipeline", "split_options", "is_local", "remote_uri", "resolve_io",
           "worker_options", "freeze_imports", "main_and_exit"]

LOCAL_RUNNERS = (None, "FnApiRunner", "DirectRunner")

IMAGE_ENV = "ESTFLOW_IMAGE"
"""Environment variable naming the image a step runs in (estflow's images set it): the default
SDK container of a remote runner's workers."""

# KFP v2's launcher maps an artifact's URI to a local path in the task's pod (and copies the
# files between them before and after the task): scheme -> local prefix.
KFP_LOCAL_PATHS = (("gs://", "/gcs/"), ("minio://", "/minio/"), ("s3://", "/s3/"))
# Beam has no minio:// filesystem: MinIO speaks S3 (give --s3_endpoint_url, credentials).
_BEAM_SCHEMES = {"minio://": "s3://"}


class BeamLocationError(ValueError):
    """A remote runner's workers could not reach an artifact."""


@dataclasses.dataclass(frozen=True)
class BeamIO:
    """Where a Beam step's job reads and writes its artifacts, and its Beam options."""

    options: tuple[str, ...]
    locations: Mapping[str, str]


def split_options(extra: Sequence[str], packed: str | None) -> list[str]:
    """The Beam options of a step: its extra arguments plus ``--beam-options "..."``."""
    return [*extra, *(shlex.split(packed) if packed else [])]


class LocalOptions(PipelineOptions):
    """The options of a pipeline that runs in this process: each view made once.

    Beam (2.77) asks the pipeline's options for a view in every type check
    (``typehints.is_consistent_with`` -> ``options.view_as(TypeOptions)``), and every view
    builds an argparse parser and parses the flags again: 2,207 views, 0.67 s of the taxi
    transform's 6.2 s. A view is a live window on the options' shared values (it keeps no
    value of its own: reads and writes go to ``_all_options``), so the first view of a class
    serves every later request for it. The cache is not pickled.
    """

    def __init__(self, flags: Sequence[str] | None = None, **kwargs) -> None:
        super().__init__(flags, **kwargs)
        object.__setattr__(self, "_views", {})

    def view_as(self, cls):
        views = self.__dict__.get("_views")
        if views is None:  # unpickled
            views = {}
            object.__setattr__(self, "_views", views)
        view = views.get(cls)
        if view is None:
            view = views[cls] = super().view_as(cls)
        return view

    def __getstate__(self):
        state = dict(super().__getstate__())
        state.pop("_views", None)
        return state


def new_pipeline(beam_options: Sequence[str]) -> beam.Pipeline:
    """A Beam pipeline for ``beam_options`` (in-memory FnApiRunner, with
    :class:`LocalOptions`, unless a runner is named). Beam's signature inspection is memoized
    in this process from then on (:mod:`.beam_signatures`)."""
    beam_signatures.install()
    if is_local(beam_options):
        return beam.Pipeline(runner=FnApiRunner(), options=LocalOptions(list(beam_options)))
    return beam.Pipeline(options=PipelineOptions(list(beam_options)))


def is_local(beam_options: Sequence[str]) -> bool:
    """Whether the job runs in this process (the in-memory FnApiRunner, multi-process direct
    running included), where the task's local paths are the workers' paths."""
    return _runner(beam_options) in LOCAL_RUNNERS


def _runner(beam_options: Sequence[str]) -> str | None:
    return PipelineOptions(list(beam_options)).view_as(StandardOptions).runner


def remote_uri(path: str, uri: str | None = None) -> str | None:
    """The URI of an artifact whose task-local path is ``path``: ``uri`` when given (KFP's
    ``artifact.uri``), else the URI KFP's local path stands for (``/gcs/b/x`` -> ``gs://b/x``),
    else None (a path that is no KFP artifact path). ``minio://`` becomes ``s3://``.

    Example:
        >>> remote_uri("/minio/mlpipeline/v2/artifacts/run/examples")
        's3://mlpipeline/v2/artifacts/run/examples'
    """
    if not uri:
        uri = next((scheme + path[len(prefix):] for scheme, prefix in KFP_LOCAL_PATHS
                    if path.startswith(prefix)), None)
    if uri is None:
        return None
    for scheme, beam_scheme in _BEAM_SCHEMES.items():
        if uri.startswith(scheme):
            return beam_scheme + uri[len(scheme):]
    return uri


def worker_options(beam_options: Sequence[str], image: str | None) -> list[str]:
    """``beam_options`` plus the workers' SDK container ``image`` for a remote runner, unless
    the options already choose the workers' environment (or no image is known)."""
    options = list(beam_options)
    if is_local(options) or not image:
        return options
    named = {o.split("=", 1)[0].lstrip("-").replace("-", "_") for o in options
             if o.startswith("--")}
    if _runner(options) == "DataflowRunner":
        chosen = {"sdk_container_image", "worker_harness_container_image"}
        return options if named & chosen else [*options, f"--sdk_container_image={image}"]
    chosen = {"environment_type", "environment_config", "environment_options",
              "sdk_container_image"}
    if named & chosen:
        return options
    return [*options, "--environment_type=DOCKER", f"--environment_config={image}"]


def resolve_io(args: argparse.Namespace, beam_options: Sequence[str],
               artifacts: Sequence[str], outputs: Sequence[str],
               env: Mapping[str, str]) -> BeamIO:
    """Where a Beam step reads and writes ``artifacts`` (parsed ``args``: ``--<artifact>`` paths
    and optional ``--<artifact>-uri``), and the job's options with the workers' image
    (``--sdk-image``, else ``env[IMAGE_ENV]``). Called by the step's ``main``, the edge.

    Local runs use the paths. A remote runner uses each artifact's :func:`remote_uri`, and the
    task's local directory of each of ``outputs`` is created empty (KFP's launcher uploads
    it, which adds nothing; the files are already at the URI). A path with no URI is kept
    (workers that share it: a PVC, or workers on this machine), except on Dataflow.

    Raises:
        BeamLocationError: a Dataflow job would write or read a local path.
    """
    options = list(beam_options)
    paths = {a: str(getattr(args, a)) for a in artifacts}
    if is_local(options):
        return BeamIO(tuple(options), paths)
    image = getattr(args, "sdk_image", None) or env.get(IMAGE_ENV)
    locations = {}
    for artifact, path in paths.items():
        uri = remote_uri(path, getattr(args, f"{artifact}_uri", None))
        if uri is None and _runner(options) == "DataflowRunner":
            raise BeamLocationError(
                f"Received --{artifact}={path}, expected a gs:// URI (or a KFP artifact path "
                f"/gcs/...; or --{artifact}-uri): Dataflow's workers cannot see this machine's "
                "files")
        locations[artifact] = uri or path
        if uri and artifact in outputs and "://" not in path:
            os.makedirs(path, exist_ok=True)
        if uri:
            print(f"[beam] {artifact}: the workers use {uri} (the task's path is {path})",
                  flush=True)
    return BeamIO(tuple(worker_options(options, image)), locations)


def freeze_imports() -> None:
    """Exempt everything imported so far from Python's cyclic garbage collector.

    A step process holds millions of objects from TensorFlow, Beam and tf.Transform; every
    full collection during the job rescans them all (pauses of ~0.3 s, about 7% of a
    million-row run). ``gc.freeze`` moves them to a permanent generation. Called once by each
    step's entry point, the edge of the process; never by library code.
    """
    gc.freeze()


def main_and_exit(main: Callable[[], int]) -> None:
    """Run ``main``, then leave with ``os._exit`` (:func:`~.entry.leave`).

    Beam + tf.Transform can segfault in interpreter teardown after all work is done
    (docs/pages/architecture.md, "The local runner"). Every output is written and closed before ``main`` returns, so skipping the
    teardown loses nothing and keeps a healthy run from exiting with a crash code.
    """
    try:
        code = main()
    except SystemExit as exit_:  # argparse errors and --help
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:  # noqa: BLE001 - report, then exit without teardown
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    entry.leave(code)

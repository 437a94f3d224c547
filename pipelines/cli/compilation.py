"""``estflow compile``: a pipeline to Kubeflow Pipelines v2 IR YAML
(:mod:`estflow.pipelines.kubeflow.compiler`), for a KFP backend version (``--kfp-backend``); and
``estflow rbac``: the Kubernetes RBAC manifests the multi-worker train task needs
(:mod:`estflow.pipelines.kubeflow.rbac`)."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

from estflow.pipelines.cli.usage import PIPELINE_HELP
from estflow.pipelines.cli.usage import UsageError
from estflow.pipelines.cli.usage import check_local_data
from estflow.pipelines.cli.usage import load_target
from estflow.pipelines.kubeflow import backend as kfp_backends
from estflow.pipelines.kubeflow import compiler as kfp_compiler
from estflow.pipelines.kubeflow import images as kfp_images
from estflow.pipelines.kubeflow import katib as kfp_katib
from estflow.pipelines.kubeflow import rbac

__all__ = ["add_commands"]


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register ``compile`` and ``rbac``."""
    cmd = commands.add_parser(
        "compile", help="compile a pipeline to Kubeflow Pipelines v2 IR YAML",
        description="Compile a pipeline to Kubeflow Pipelines v2 IR YAML (one task per step). "
        "Never imports TensorFlow or Beam.")
    cmd.add_argument("pipeline", metavar="PIPELINE", help=PIPELINE_HELP)
    cmd.add_argument("-o", "--output", required=True, metavar="OUT.yaml",
                     help="the YAML file to write")
    cmd.add_argument("--image", default=None, metavar="IMAGE",
                     help="base container image of the step tasks, as published by `make "
                     "image IMAGE_REPO=REGISTRY/estflow` and docker push, e.g. "
                     "REGISTRY/estflow:VERSION or REGISTRY/estflow@sha256:DIGEST (default: "
                     f"${kfp_images.ENV}; required otherwise: the reference `make image` tags "
                     f"by default, {kfp_compiler.DEFAULT_IMAGE}, is not published). A step "
                     "declaring a GPU or TPU accelerator runs IMAGE's tag with -gpu or -tpu")
    cmd.add_argument("--step-image", action="append", default=[], metavar="STEP=IMAGE",
                     help="the image of one step's task instead (repeatable), e.g. "
                     "train=REGISTRY/estflow@sha256:DIGEST: required for a GPU or TPU step "
                     "when IMAGE is pinned by digest, whose variants cannot be derived")
    cmd.add_argument("--small-image", default=None, metavar="IMAGE",
                     help="image of the report and placement tasks, which need neither "
                     "TensorFlow nor Beam (default: IMAGE's tag with -slim, as `make image` "
                     "builds it; IMAGE itself when pinned by digest)")
    cmd.add_argument("--source-root", default=None, metavar="ROOT",
                     help="default of the source_root pipeline parameter: where the ingest "
                     "task resolves relative data paths (a directory in the image, or "
                     "module:pkg.mod); default: the pipeline module's directory")
    cmd.add_argument("--no-cache", action="store_true",
                     help="disable KFP caching for every task (by default a task is reused "
                     "when its cache key, computed by the run's first task from the data, "
                     "the spec part the step reads and the code, is an earlier run's)")
    cmd.add_argument("--push-base-path", default=None, metavar="URL",
                     help="where the compiled pipeline pushes models, replacing "
                     "PushTarget.base_path (a Kubeflow task cannot push to a relative or "
                     "local path outside a mounted volume), e.g. gs://BUCKET/models")
    cmd.add_argument("--beam-runner", default=None, metavar="RUNNER",
                     help="Beam runner of the ingest and transform tasks: local (default: "
                     "in-memory in the task's pod), dataflow, flink, spark or portable")
    cmd.add_argument("--beam-options", default="", metavar='"--name=value ..."',
                     help="further Beam options as one string, written with '=' (e.g. "
                     "--beam-options=\"--project=p --region=r --temp_location=gs://b/tmp\"); "
                     "checked for the runner, and the default of "
                     "the beam_options pipeline parameter (override per run with "
                     "estflow submit --param beam_options=...)")
    releases = ", ".join(f"{k}: {v.major}.{v.minor}.{v.patch}"
                         for k, v in kfp_backends.KUBEFLOW_RELEASES.items())
    cmd.add_argument("--kfp-backend", default=kfp_compiler.DEFAULT_KFP_BACKEND,
                     metavar="VERSION",
                     help="the oldest KFP backend (API server) version the pipeline must run "
                     "on (default: %(default)s). Older than 2.14: the exit handler's report "
                     "gets no final state; older than 2.5: placement parameters become the "
                     f"declared constants. Kubeflow releases ship: {releases}")
    cmd.add_argument("--tune-on", choices=kfp_katib.TUNE_ON, default=kfp_katib.DEFAULT_TUNE_ON,
                     metavar="{" + ",".join(kfp_katib.TUNE_ON) + "}",
                     help="where a pipeline's hyperparameter search (Pipeline.tune) runs: "
                     "katib (default): a Katib Experiment the tune task creates and follows, "
                     "one pod per trial (Kubeflow 26.03 installs Katib v0.19.0; the namespace "
                     "needs Katib's metrics-collector-injection label, which Kubeflow profiles "
                     "have, and a bucket pipeline root, since the trials read the inputs from "
                     "it); task: every trial inside the tune task's pod, for a KFP without "
                     "Katib; parallel-for: the trials drawn now from Tune.seed (random or grid; "
                     "no tpe, no early_stopping) and run one pod each in a KFP ParallelFor of "
                     "Tune.parallel at once, then the tune task keeps the best, for a KFP "
                     "without Katib (needs --kfp-backend 2.17 or later).")
    cmd.set_defaults(handler=_compile)

    cmd = commands.add_parser(
        "rbac", help="write the RBAC manifests the multi-worker train task needs",
        description="Write a Role (create/get/list/watch/delete TFJobs and TrainJobs) and its "
        "RoleBinding to the service account KFP runs the pipeline's tasks with, as YAML "
        "(kubectl apply -f OUT.yaml). Needed when RunConfig(cluster=...) trains on several "
        "workers.")
    cmd.add_argument("-o", "--output", required=True, metavar="OUT.yaml",
                     help="the YAML file to write ('-': stdout)")
    cmd.add_argument("--namespace", default=rbac.DEFAULT_NAMESPACE,
                     help="where the pipeline's pods run (default: %(default)s, a standalone "
                     "KFP; a Kubeflow profile's namespace in multi-user Kubeflow)")
    cmd.add_argument("--service-account", default=rbac.DEFAULT_SERVICE_ACCOUNT,
                     help="the runs' service account (default: %(default)s; default-editor in "
                     "a Kubeflow profile; the one given to estflow submit --service-account)")
    cmd.add_argument("--create-service-account", action="store_true",
                     help="also create the service account (it then needs KFP's runner "
                     "permissions too)")
    cmd.set_defaults(handler=_rbac)


def _compile(args: argparse.Namespace) -> int:
    """Compile, or refuse with every problem found in one error: the image, the step images,
    the local data, the push target, the backend, ... are all checked before any is reported,
    so a command is fixed in one attempt, not one refusal per attempt."""
    start = time.perf_counter()
    loaded = load_target(args.pipeline)
    problems: list[str] = []
    try:
        check_local_data(loaded, args.pipeline)  # only a CSV source readable on this machine
    except UsageError as err:
        problems.append(str(err))
    try:
        image = kfp_images.base_image(args.image, os.environ)
    except kfp_images.ImageError as err:
        problems.append(str(err))
        image = kfp_compiler.DEFAULT_IMAGE  # stands in while the rest is checked; not written
    try:
        step_images = kfp_images.parse_step_images(args.step_image)
    except kfp_images.ImageError as err:
        problems.append(str(err))
        step_images = {}
    source_root_note = None
    if args.source_root is None and not loaded.importable:
        source_root_note = (f"{args.pipeline} is not an importable module, so the source_root "
                            f"parameter defaults to the local directory {loaded.file.parent}, "
                            "which the image may not have; pass --source-root")
    caching = (dict.fromkeys([*kfp_compiler.DEFAULT_CACHING,
                              *(s.name for s in loaded.pipeline.steps)], False)
               if args.no_cache else None)
    try:
        compiled = kfp_compiler.compile_pipeline(
            loaded, args.output, image=image,
            source_root=args.source_root, caching=caching, beam_runner=args.beam_runner,
            beam_options=shlex.split(args.beam_options), kfp_backend=args.kfp_backend,
            push_base_path=args.push_base_path, small_image=args.small_image,
            step_images=step_images, tune_on=args.tune_on, problems=problems)
    except kfp_compiler.CompileError as err:
        # The note is no refusal, but is best acted on in the same attempt as them.
        note = f"\nnote: {source_root_note}" if source_root_note else ""
        raise UsageError(f"{err}{note}") from None
    if source_root_note:
        print(f"estflow compile: note: {source_root_note}", file=sys.stderr)
    for note in compiled.notes:
        print(f"estflow compile: note: {note}", file=sys.stderr)
    print(f"Compiled pipeline {loaded.pipeline.name!r} to {compiled.path}: "
          f"{len(compiled.tasks)} tasks ({' -> '.join(compiled.tasks)}), "
          f"images {_images_line(compiled.images)}, "
          f"needs KFP backend >= {compiled.kfp_backend}, "
          f"in {time.perf_counter() - start:.2f}s")
    return 0


def _images_line(images: dict[str, str]) -> str:
    """``IMAGE (task, task), IMAGE (task)``: each image once, with the tasks that run it."""
    tasks: dict[str, list[str]] = {}
    for task, image in images.items():
        tasks.setdefault(image, []).append(task)
    return ", ".join(f"{image} ({', '.join(names)})" for image, names in tasks.items())


def _rbac(args: argparse.Namespace) -> int:
    try:
        documents = rbac.manifests(args.namespace, args.service_account,
                                   create_service_account=args.create_service_account)
    except ValueError as err:
        raise UsageError(str(err)) from None
    text = rbac.render(documents)
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    path = Path(args.output)
    if not path.parent.is_dir():
        raise UsageError(f"Received an invalid value for `--output`, expected a file in an "
                         f"existing directory. Received: {args.output}")
    path.write_text(text)
    kinds = ", ".join(d["kind"] for d in documents)
    print(f"Wrote {kinds} for service account {args.namespace}/{args.service_account} to "
          f"{path}; apply with: kubectl apply -f {path}")
    return 0

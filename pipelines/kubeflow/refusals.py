"""What ``estflow compile`` refuses before it builds anything: :class:`CompileError` and the
checks of the compile options against the pipeline and the target KFP backend (where a push
target must be, the output file, the image, the backend version, storage an old driver would
drop). The compiler collects every refusal of one compile (:func:`collect`) and raises them at
once."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from estflow.dsl.contracts import PUSH
from estflow.dsl.contracts import STEPS
from estflow.dsl.pipeline import Pipeline
from estflow.dsl.resources import Resources
from estflow.pipelines.kubeflow import backend as kfp_backends
from estflow.pipelines.kubeflow.images import DEFAULT_IMAGE

__all__ = ["CompileError", "collect", "check_push_target", "check_output_path", "check_image",
           "check_backend", "check_storage"]


class CompileError(ValueError):
    """An option of the compilation (not the declaration) is invalid. ``problems``: each
    refusal, when a compile found several (its message then lists them all)."""

    def __init__(self, *problems: str) -> None:
        self.problems = tuple(problems)
        if len(problems) == 1:
            super().__init__(problems[0])
        else:
            super().__init__(f"{len(problems)} problems, all to fix before the pipeline "
                             "compiles:\n" + "\n".join(f"  - {p}" for p in problems))


def collect(problems: list[str], check: Callable, *args, **kwargs):
    """``check(*args, **kwargs)``, its CompileError's problems added to ``problems`` (then
    None) instead of raised: a compile reports every refusal at once, not one per attempt."""
    try:
        return check(*args, **kwargs)
    except CompileError as err:
        problems.extend(err.problems)
        return None


def _push_target_readers(pipeline: Pipeline) -> list[str]:
    """The steps the pipeline runs that read or write the push target's storage (their
    contract rows read the push target's field, ``PUSH.needs``, or its ``base_path``): push
    writes it; evaluate reads the served model there as its baseline, validate its training
    statistics."""
    field = PUSH.needs
    return [s.name for s in reversed(STEPS)
            if any(r in (field, f"{field}.base_path") for r in s.reads or ())
            and (s.needs is None or getattr(pipeline, s.needs, None) is not None)]


def check_push_target(pipeline: Pipeline, given: bool = False) -> None:
    """A push target must be somewhere a Kubeflow task can reach and that outlives its pod:
    a bucket URL, or a path on a volume every task reading it mounts
    (:func:`_push_target_readers`)."""
    push = pipeline.push
    if push is None:
        return
    readers = _push_target_readers(pipeline)
    base = push.base_path
    scheme = base.partition("://")[0] if "://" in base else ""
    if scheme and scheme != "file":
        return
    field = "--push-base-path" if given else "`push.base_path`"
    local = base[len("file://"):] if scheme else base
    fix = ("declare a bucket URL (gs://BUCKET/models, s3://BUCKET/models) or a path on a "
           f"volume the {' and '.join(readers)} tasks mount ("
           + " and ".join(f"resources[{s!r}].pvcs" for s in readers)
           + "), or compile with --push-base-path gs://BUCKET/models")
    if not os.path.isabs(local):
        raise CompileError(
            f"Received an invalid value for {field}, expected a place a Kubeflow task can "
            f"reach: a relative path is resolved in the task's pod, where the pushed model is "
            f"lost when the pod ends (and every later run finds no baseline); {fix}. "
            f"Received: push.base_path={base!r}")
    for step in readers:
        mounts = [p.mount_path for p in pipeline.resources.get(step, Resources()).pvcs]
        if not any(_under(local, mount) for mount in mounts):
            raise CompileError(
                f"Received an invalid value for {field}, expected a path on a volume the "
                f"{step} task mounts (resources[{step!r}].pvcs mount "
                f"{mounts or 'nothing'}): a local path outside a volume is lost with the "
                f"{step} task's pod; {fix}. Received: push.base_path={base!r}")


def _under(path: str, mount: str) -> bool:
    path, mount = os.path.normpath(path), os.path.normpath(mount)
    return path == mount or path.startswith(mount.rstrip("/") + "/")


def check_output_path(output_path: str | os.PathLike) -> Path:
    path = Path(output_path)
    if path.suffix not in (".yaml", ".yml"):
        raise CompileError("Received an invalid value for `output_path`, expected a file "
                           f"ending in .yaml or .yml. Received: output_path={str(path)!r}")
    if not path.parent.is_dir():
        raise CompileError("Received an invalid value for `output_path`, expected a file in "
                           f"an existing directory. Received: output_path={str(path)!r}")
    return path


def check_image(image: str) -> str:
    if not isinstance(image, str) or not image or any(c.isspace() for c in image):
        raise CompileError("Received an invalid value for `image`, expected a container image "
                           f"reference such as {DEFAULT_IMAGE!r}. Received: image={image!r}")
    return image


def check_backend(version: str) -> kfp_backends.BackendVersion:
    try:
        target = kfp_backends.parse(version)
    except ValueError as err:
        raise CompileError(str(err).replace("Received an invalid KFP backend version",
                                            "Received an invalid value for `kfp_backend`")
                           ) from None
    if target < kfp_backends.OLDEST:
        raise CompileError(f"Received an invalid value for `kfp_backend`, expected "
                           f"{kfp_backends.OLDEST} or newer (the oldest KFP backend whose v2 "
                           f"driver runs estflow's tasks; Kubeflow 1.10.0 ships 2.4.1). "
                           f"Received: kfp_backend={version!r}")
    return target


def check_storage(step: str, resources: Resources,
                   target: kfp_backends.BackendVersion) -> None:
    """CompileError for storage that ``target``'s driver would silently run otherwise: it drops
    a PVC's subPath (the whole volume mounted) and a secret's ``optional`` (the secret then
    required)."""
    checks = (
        ([p.pvc_name for p in resources.pvcs if p.sub_path], kfp_backends.PVC_SUB_PATH,
         "pvcs with a sub_path", "it mounts the whole volume; subPath",
         "mount the volume without sub_path and put the subdirectory in the paths"),
        ([e.secret for e in resources.secrets_as_env if e.optional],
         kfp_backends.SECRET_OPTIONAL, "secrets_as_env with optional=True",
         "the secret is then required and the pod does not start without it; optional",
         "declare optional=False and create the secret"))
    for names, feature, declared, dropped, instead in checks:
        since = feature.since
        if names and target < since:
            raise CompileError(f"Received resources[{step!r}].{declared} ({', '.join(names)}), "
                               f"which the driver of KFP backend {target} drops ({dropped} "
                               f"needs {since}, {', '.join(feature.evidence)}): {instead}, or "
                               f"compile with --kfp-backend {since.major}.{since.minor}")

"""Beam pipeline options for the preprocessing steps, built and checked before any step starts.

Pure standard library: ``estflow.pipelines`` never imports Beam. The options pass through
unchanged to the steps (``--beam-options "..."``), where Beam parses them; this module only
knows what each runner cannot do without, so a missing option is reported by name at once
instead of as a stack trace from deep inside a job submission.

Runners (aliases are case-insensitive)::

    local (default; also direct, DirectRunner, FnApiRunner)   in-memory FnApiRunner, offline
    dataflow / DataflowRunner    --project, --region, --temp_location=gs://...
    flink / FlinkRunner          --flink_master=HOST:PORT
    spark / SparkRunner          --spark_master_url=spark://HOST:PORT
    portable / PortableRunner    --job_endpoint=HOST:PORT

Example:
    >>> build_options("dataflow", ["--project=my-proj", "--region=europe-west4",
    ...                            "--temp_location=gs://bucket/tmp"])
    ['--runner=DataflowRunner', '--project=my-proj', '--region=europe-west4', '--temp_location=gs://bucket/tmp']
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from collections.abc import Sequence

__all__ = ["BeamOptionsError", "RUNNERS", "build_options", "parse_options", "check_parameter"]

_LOCAL = ("local", "direct", "directrunner", "fnapirunner")
RUNNERS: dict[str, tuple[str, ...]] = {
    "DataflowRunner": ("project", "region", "temp_location"),
    "FlinkRunner": ("flink_master",),
    "SparkRunner": ("spark_master_url",),
    "PortableRunner": ("job_endpoint",),
}
"""Beam runner -> the options it needs (besides the local default)."""

_ALIASES = {name.lower(): name for name in RUNNERS} | {
    name.lower().removesuffix("runner"): name for name in RUNNERS}
_PROJECT = re.compile(r"^[a-z][-a-z0-9:.]{4,61}[a-z0-9]$")
_ENDPOINT = re.compile(r"^[\w.-]+:\d+$")


class BeamOptionsError(ValueError):
    """The Beam options cannot work: an unknown runner, or a missing or malformed option."""


def parse_options(args: Sequence[str]) -> dict[str, str | None]:
    """``["--k=v", "--k", "v", "--flag"]`` -> ``{"k": "v", "flag": None}`` (order kept).

    Raises:
        BeamOptionsError: an argument is not an option, or an option is given twice.
    """
    options: dict[str, str | None] = {}
    items = list(args)
    i = 0
    while i < len(items):
        arg = items[i]
        if not arg.startswith("--") or len(arg) < 3:
            raise BeamOptionsError(f"expected Beam options like --name=value, got {arg!r}")
        name, has_value, value = arg[2:].partition("=")
        if not has_value and i + 1 < len(items) and not items[i + 1].startswith("--"):
            value, has_value = items[i + 1], True
            i += 1
        name = name.replace("-", "_")
        if name in options:
            raise BeamOptionsError(f"--{name} is given twice")
        options[name] = value if has_value else None
        i += 1
    return options


def build_options(runner: str | None, args: Sequence[str]) -> list[str]:
    """The Beam options of a preprocessing run, checked for ``runner``.

    Args:
        runner: a runner name or alias (None or ``local``: the in-memory FnApiRunner).
        args: further Beam options (``--project=p``, ``--temp_location gs://...``).

    Returns:
        Normalised ``--name=value`` options, ``--runner=...`` first (none for local runs).

    Raises:
        BeamOptionsError: naming the unknown runner or every missing/malformed option.
    """
    options = parse_options(args)
    if "runner" in options:
        if runner is not None:
            raise BeamOptionsError("give the runner once: --runner is given twice")
        runner = options.pop("runner")
    beam_runner = _resolve(runner)
    problems = _check(beam_runner, options) if beam_runner else []
    if problems:
        raise BeamOptionsError(f"{beam_runner} cannot run with these options: "
                               + "; ".join(problems))
    normalised = [f"--{k}" if v is None else f"--{k}={v}" for k, v in options.items()]
    return ([f"--runner={beam_runner}"] if beam_runner else []) + normalised


def check_parameter(params: Mapping[str, object] | None) -> None:
    """Check a run's ``beam_options`` pipeline parameter, if given, as ``estflow compile``
    checks its default (``estflow submit/schedule --param beam_options="--runner=..."``).

    Raises:
        BeamOptionsError: naming the parameter, the problem and the value received.
    """
    value = (params or {}).get("beam_options")
    if not value:
        return
    try:
        build_options(None, shlex.split(str(value)))
    except (BeamOptionsError, ValueError) as err:
        raise BeamOptionsError(f"Received an invalid value for the `beam_options` parameter: "
                               f"{err}. Received: beam_options={value!r}") from None


def _resolve(runner: str | None) -> str | None:
    if runner is None or runner.lower() in _LOCAL:
        return None
    try:
        return _ALIASES[runner.lower()]
    except KeyError:
        known = ", ".join(["local", *RUNNERS])
        raise BeamOptionsError(f"unknown runner {runner!r}; expected one of: {known}") from None


def _check(runner: str, options: dict[str, str | None]) -> list[str]:
    missing = [f"--{name}" for name in RUNNERS[runner] if not options.get(name)]
    problems = [f"missing {', '.join(missing)}"] if missing else []
    project = options.get("project")
    if runner == "DataflowRunner" and project and not _PROJECT.match(project):
        problems.append(f"--project={project} is not a Google Cloud project id")
    for name in ("temp_location", "staging_location"):
        value = options.get(name)
        if runner == "DataflowRunner" and value and not value.startswith("gs://"):
            problems.append(f"--{name}={value} must be a gs:// path (Dataflow workers read it)")
    for name in ("flink_master", "job_endpoint"):
        value = options.get(name)
        if value and runner in ("FlinkRunner", "PortableRunner") and not (
                _ENDPOINT.match(value.removeprefix("http://"))):
            problems.append(f"--{name}={value} must be HOST:PORT of a running service (an "
                            "embedded cluster would be downloaded, which needs network)")
    return problems

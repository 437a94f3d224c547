"""``estflow submit``, ``estflow schedule`` and ``estflow schedules``: runs and recurring runs
on a Kubeflow Pipelines API, through the KFP client in :mod:`estflow.pipelines.kubeflow.submit`.

Each handler prints one line per result and returns the exit status: 0, 2 for the user's
mistakes (bad cron or time zone, ``--param``, host, package, an unreadable token file or CA
bundle), 1 when the KFP API is unreachable, refuses the login, answers an error or is older
than the package needs, when something else answers in its place (a login proxy's redirect or
page, an answer without the run's or schedule's id: nothing is reported as created that the
API did not say it created), or when ``submit --wait`` followed a run that did not succeed;
messages go to stderr.

Every command takes the login options of a multi-user Kubeflow (``--token``, ``--token-file``,
``--cookies``, ``--ca-cert``, ``--insecure``, each with its environment variable: see
:mod:`estflow.pipelines.kubeflow.connection`); ``--host`` defaults to ``$KF_PIPELINES_ENDPOINT``, as
for ``kfp.Client``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from estflow.pipelines.cli.usage import UsageError
from estflow.pipelines.cli.usage import load_target
from estflow.pipelines.kubeflow import compiler as kfp_compiler
from estflow.pipelines.kubeflow import connection
from estflow.pipelines.kubeflow import cron_zone
from estflow.pipelines.kubeflow import images as kfp_images
from estflow.pipelines.kubeflow import submit

__all__ = ["add_commands", "compile_target"]

_PIPELINE_HELP = ("a compiled .yaml, or a pipeline path/to/file.py[:attr] or "
                  "package.module[:attr] (compiled first)")


def compile_target(target: str, output: str, push_base_path: str | None = None) -> None:
    """Compile a PIPELINE that is not a ``.yaml`` already (a ``file.py[:attr]`` or
    ``package.module[:attr]`` target) to ``output``, on ``$ESTFLOW_IMAGE`` (and
    ``push_base_path`` replacing the push target's base path)."""
    try:
        image = kfp_images.base_image(None, os.environ, expected=(
            f"${kfp_images.ENV} to compile {target} on, or a file compiled first with "
            f"estflow compile {target} -o PIPELINE.yaml --image REF"))
        kfp_compiler.compile_pipeline(load_target(target), output, image=image,
                                      push_base_path=push_base_path)
    except (kfp_compiler.CompileError, kfp_images.ImageError) as err:
        raise UsageError(str(err)) from None


def _compiler(args: argparse.Namespace) -> Callable[[str, str], None]:
    if args.push_base_path is None:
        return lambda target, output: compile_target(target, output)
    return lambda target, output: compile_target(target, output, args.push_base_path)


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Register ``submit``, ``schedule`` and ``schedules``."""
    cmd = commands.add_parser("submit", help="run a pipeline once on a Kubeflow Pipelines API",
                              description="Run a pipeline once on a Kubeflow Pipelines API.")
    cmd.add_argument("pipeline", metavar="PIPELINE", help=_PIPELINE_HELP)
    _add_api_options(cmd)
    _add_run_options(cmd)
    cmd.add_argument("--run-name", help="the run's name (default: pipeline name and time)")
    cmd.add_argument("--wait", action="store_true",
                     help="follow the run: print its state as it changes, then how it ended "
                     "and the failing task; exit 1 unless it succeeded")
    cmd.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                     help="with --wait: give up following after this long (the run goes on)")
    cmd.add_argument("--poll-seconds", type=float, default=10, metavar="SECONDS",
                     help="with --wait: seconds between two looks at the run (default: "
                     "%(default)s)")
    cmd.set_defaults(handler=_handler(_submit))

    cmd = commands.add_parser(
        "schedule", help="run a pipeline on a cron schedule (a KFP recurring run)",
        description="Create a KFP recurring run. CRON has 5 fields (minute hour day-of-month "
        "month day-of-week), 6 (seconds first, as KFP wants) or is a macro such as @daily.")
    cmd.add_argument("pipeline", metavar="PIPELINE", help=_PIPELINE_HELP)
    cmd.add_argument("--cron", required=True, help='e.g. "0 3 * * *" (03:00 every day, in '
                     "the scheduler's time zone unless --timezone says otherwise)")
    cmd.add_argument("--timezone", metavar="ZONE",
                     help="the IANA time zone CRON is written in (e.g. Asia/Kolkata): it is "
                     "rewritten for the scheduler's zone, or refused when no one cron there fires "
                     "at those times all year (daylight saving)")
    cmd.add_argument("--scheduler-timezone", metavar="ZONE",
                     default=cron_zone.DEFAULT_SCHEDULER_ZONE,
                     help="the zone KFP's scheduler reads cron in: the install's "
                     "cronScheduleTimezone (pipeline-install-config ConfigMap; default: "
                     "%(default)s, as KFP's manifests set it)")
    _add_api_options(cmd)
    _add_run_options(cmd)
    cmd.add_argument("--name", help="the schedule's name (default: the pipeline's name)")
    cmd.add_argument("--max-concurrency", type=int, default=1, metavar="N",
                     help="runs of this schedule allowed at once (default: %(default)s)")
    cmd.add_argument("--catchup", action="store_true",
                     help="after a pause, start one run per missed interval (default: only "
                     "the latest)")
    cmd.add_argument("--paused", action="store_true", help="create it disabled")
    cmd.set_defaults(handler=_handler(_schedule))

    cmd = commands.add_parser("schedules", help="list, pause, resume or delete schedules",
                              description="Manage KFP recurring runs.")
    actions = cmd.add_subparsers(dest="action", required=True, metavar="ACTION")
    action = actions.add_parser("list", help="list schedules")
    _add_api_options(action)
    action.add_argument("--experiment", help="only this experiment's schedules")
    action.set_defaults(handler=_handler(_list))
    for name, verb in (("pause", "disable"), ("resume", "enable"), ("delete", "delete")):
        action = actions.add_parser(name, help=f"{verb} a schedule")
        action.add_argument("schedule_id", metavar="ID", help="the schedule's id")
        _add_api_options(action)
        action.set_defaults(handler=_handler(_change))


def _add_api_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", metavar="URL",
                        help="the KFP API endpoint, e.g. http://localhost:8080 or "
                        "https://kubeflow.example.com/pipeline (default: $KF_PIPELINES_ENDPOINT)")
    parser.add_argument("--namespace", help="Kubernetes namespace: your Kubeflow profile's, on "
                        "multi-user Kubeflow")
    login = parser.add_argument_group(
        "logging in (multi-user Kubeflow)",
        "No value given here is ever printed; a token on the command line is visible to other "
        "local users (ps): prefer the file or the environment variable.")
    login.add_argument("--token", metavar="TOKEN",
                       help=f"a bearer token (default: ${connection.TOKEN_ENV})")
    login.add_argument("--token-file", metavar="PATH",
                       help=f"a file holding the bearer token, read at each request (default: "
                       f"${connection.SA_TOKEN_ENV}, else {connection.SA_TOKEN_PATH} when it "
                       "exists, as kfp.Client does in a Kubeflow notebook)")
    login.add_argument("--cookies", metavar="COOKIES",
                       help="a Cookie header, e.g. '_oauth2_proxy=VALUE' or "
                       f"'authservice_session=VALUE' (default: ${connection.COOKIES_ENV})")
    login.add_argument("--ca-cert", metavar="PEM",
                       help="the CA bundle that signed the server's TLS certificate (default: "
                       f"${connection.CA_CERT_ENV})")
    login.add_argument("--insecure", action="store_true",
                       help="do not check the server's TLS certificate (self-signed test "
                       "installs only)")


def _connection(args: argparse.Namespace) -> tuple[str, connection.Login]:
    """The host (``--host`` or ``$KF_PIPELINES_ENDPOINT``) and the login of ``args``."""
    host = args.host or os.environ.get("KF_PIPELINES_ENDPOINT")
    if not host:
        raise ValueError("no KFP API given: pass --host URL (or set KF_PIPELINES_ENDPOINT)")
    return host, connection.Login.resolve(token=args.token, token_file=args.token_file,
                                          cookies=args.cookies, ca_cert=args.ca_cert,
                                          insecure=args.insecure)


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--experiment", help=f"experiment name (default: "
                        f"{submit.DEFAULT_EXPERIMENT}; created if missing)")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="a pipeline parameter; repeat for several")
    parser.add_argument("--service-account", metavar="NAME",
                        help="the Kubernetes service account of the run's pods (default: the "
                        "server's; see estflow rbac for what multi-worker training needs)")
    parser.add_argument("--skip-backend-check", action="store_true",
                        help="send the package even when the server's KFP backend version is "
                        "older than the package needs")
    parser.add_argument("--push-base-path", default=None, metavar="URL",
                        help="compiling a pipeline file: where its models are pushed, "
                        "replacing PushTarget.base_path (e.g. gs://BUCKET/models)")


def _handler(command: Callable[[argparse.Namespace], str | tuple[str, int]],
             ) -> Callable[[argparse.Namespace], int]:
    """Wrap ``command`` (which returns the text to print, or the text and the exit status)
    with the exit-status convention."""
    def handle(args: argparse.Namespace) -> int:
        prog = " ".join(filter(None, ["estflow", getattr(args, "command", None),
                                      getattr(args, "action", None)]))
        try:
            result = command(args)
            text, code = result if isinstance(result, tuple) else (result, 0)
            print(text, flush=True)
            return code
        except submit.SubmitError as err:
            print(f"{prog}: error: {err}", file=sys.stderr)
            return 1
        except (ValueError, FileNotFoundError) as err:
            print(f"{prog}: error: {err}", file=sys.stderr)
            return 2
        return 0
    return handle


def _submit(args: argparse.Namespace) -> str | tuple[str, int]:
    if not args.wait and (args.timeout is not None):
        raise ValueError("--timeout follows a run: give it with --wait")
    host, login = _connection(args)
    run = submit.submit(args.pipeline, host=host, experiment=args.experiment,
                        params=submit.parse_params(args.param), run_name=args.run_name,
                        namespace=args.namespace, compile_fn=_compiler(args),
                        service_account=args.service_account,
                        check_backend=not args.skip_backend_check, login=login)
    submitted = f"Submitted run {run.run_id} ({run.run_name!r}): {run.url}"
    if not args.wait:
        return submitted
    print(submitted, flush=True)
    result = submit.wait(host, run.run_id, namespace=args.namespace, login=login,
                         poll_seconds=args.poll_seconds, timeout=args.timeout,
                         echo=lambda line: print(line, flush=True))
    lines = [f"Run {run.run_id} finished: {result.state}"
             + (f": {result.error}" if result.error and not result.succeeded else "")]
    for failure in result.failed_tasks:
        lines.append(f"  failed task {failure.task}: {failure.message}"
                     + (f" (pod {failure.pod})" if failure.pod else ""))
    return "\n".join(lines), 0 if result.succeeded else 1


def _schedule(args: argparse.Namespace) -> str:
    host, login = _connection(args)
    created = submit.schedule(args.pipeline, host=host, cron=args.cron, name=args.name,
                              experiment=args.experiment, params=submit.parse_params(args.param),
                              max_concurrency=args.max_concurrency, no_catchup=not args.catchup,
                              enabled=not args.paused, namespace=args.namespace,
                              compile_fn=_compiler(args), service_account=args.service_account,
                              check_backend=not args.skip_backend_check, timezone=args.timezone,
                              scheduler_timezone=args.scheduler_timezone, login=login)
    # The zone is always said: KFP stores no zone, its scheduler applies its own.
    written = (f" ({args.cron!r} in {args.timezone})"
               if args.timezone and args.timezone != args.scheduler_timezone else "")
    return (f"Scheduled {created.schedule_id} ({created.name!r}), cron {created.cron!r} in "
            f"{args.scheduler_timezone}{written}, {created.state}")


def _list(args: argparse.Namespace) -> str:
    host, login = _connection(args)
    found = submit.list_schedules(host, args.experiment, namespace=args.namespace, login=login)
    if not found:
        return "No schedules."
    width = max(len(s.schedule_id) for s in found)
    return "\n".join(f"{s.schedule_id:<{width}}  {s.state:<8}  {s.cron or '(periodic)':<16}  "
                     f"{s.name}" for s in found)


def _change(args: argparse.Namespace) -> str:
    host, login = _connection(args)
    if args.action == "delete":
        submit.delete(host, args.schedule_id, namespace=args.namespace, login=login)
        return f"Deleted schedule {args.schedule_id}"
    change = submit.pause if args.action == "pause" else submit.resume
    result = change(host, args.schedule_id, namespace=args.namespace, login=login)
    return f"Schedule {result.schedule_id} ({result.name!r}) is {result.state}"

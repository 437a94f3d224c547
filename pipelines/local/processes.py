"""A step as one process (:class:`ProcessExecutor`), behind the runner's one small interface
(:class:`Executor`): its entry point ``python -m <module> ARGS``, its output in its log, its
own progress lines echoed, its exit status turned into :class:`StepFailed`.

The runner (:mod:`estflow.pipelines.local.runner`) picks an executor per step (this one, or
:class:`~estflow.pipelines.local.cluster.ClusterExecutor` for a multi-worker train step); an
executor knows nothing of plans or pipelines, only the :class:`StepRun` it is given (as
kfp.local's task handlers get one task). With a
:class:`~estflow.pipelines.local.prestart.Prestarter`, the step runs in its process started ahead
when there is one for the same module and environment; either way with the same output, log,
exit status and Ctrl-C handling (:mod:`estflow.pipelines.local.stopping`), and the same environment
(:func:`~estflow.pipelines.local.step_env.full_env`, re-exported here with
:data:`~estflow.pipelines.local.step_env.PRESTART_MODULE`).
"""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Callable
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Protocol

from estflow.pipelines.local.files import naming
from estflow.pipelines.local.step_env import PRESTART_MODULE
from estflow.pipelines.local.step_env import full_env
from estflow.pipelines.local.stopping import StepFailed
from estflow.pipelines.local.stopping import StepInterrupted
from estflow.pipelines.local.stopping import stop_process

if TYPE_CHECKING:
    from estflow.pipelines.local.prestart import Prestarter

__all__ = ["StepRun", "Executor", "ProcessExecutor", "run_process", "full_env",
           "PRESTART_MODULE"]

# How many of a failed step's last output lines its error quotes (the log has them all).
_TAIL_LINES = 30


@dataclasses.dataclass(frozen=True)
class StepRun:
    """One step to run: its name, its command line, the directory its logs go to (it exists),
    where its progress lines go, and the environment variables it gets beyond the runner's."""

    name: str
    command: tuple[str, ...]
    directory: Path
    echo: Callable[[str], None] = print
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # told the step's process once it runs (a runner running several steps at once stops
    # them all on Ctrl-C)
    on_start: Callable[[subprocess.Popen], None] | None = None


class Executor(Protocol):
    """Runs one step to its end."""

    def execute(self, run: StepRun) -> None:
        """Run ``run.command``; return when it succeeded.

        Raises:
            StepFailed: the step failed; the message names it and its log.
        """


@dataclasses.dataclass(frozen=True)
class ProcessExecutor:
    """The step as one subprocess; output in ``<directory>/log.txt``, its own progress lines
    (``[<step> ...``) echoed. With a ``prestarter``, the step's prestarted process when it has
    one that fits (same command module and environment), else a plain start."""

    prestarter: Prestarter | None = None

    def execute(self, run: StepRun) -> None:
        run_process(run, run.directory / "log.txt", run.env, on_start=run.on_start,
                    prestarter=self.prestarter)


def run_process(run: StepRun, log_path: Path, env: Mapping[str, str],
                on_start: Callable[[subprocess.Popen], None] | None = None,
                prestarter: Prestarter | None = None) -> None:
    """Run ``run.command`` with ``env`` (in ``run.name``'s prestarted process when
    ``prestarter`` has one that fits), writing its output to ``log_path`` and echoing its
    progress lines; raise :class:`StepFailed` with its last lines when it exits non-zero."""
    proc = prestarter.take(run.name, run.command, env) if prestarter is not None else None
    # An OSError here is the log's (a full disk): it is named, and the step, which could no
    # longer be logged, is stopped.
    with naming(log_path), open(log_path, "w") as log, proc or _start(run, env) as proc:
        tail: list[str] = []
        try:
            if on_start is not None:
                on_start(proc)
            for line in proc.stdout:
                log.write(line)
                line = line.rstrip("\n")
                tail = (tail + [line])[-_TAIL_LINES:]
                if line.startswith(f"[{run.name} "):  # the step's own progress, echoed
                    run.echo("    " + line)
            code = proc.wait()
        except KeyboardInterrupt as stop:
            stop_process(proc, log, stop)
            raise StepInterrupted(run.name) from None
        except OSError:
            proc.kill()
            raise
    if code != 0:
        shown = "\n".join("    " + t for t in tail)
        failed = StepFailed(f"step {run.name!r} failed (exit code {code}); last lines:\n"
                            f"{shown}\nfull log: {log_path}")
        failed.returncode = code
        raise failed


def _start(run: StepRun, env: Mapping[str, str]) -> subprocess.Popen:
    """The step's process, started plainly.

    Raises:
        StepFailed: it could not be started (the OS error said).
    """
    try:
        return subprocess.Popen(run.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=full_env(env))
    except OSError as err:
        raise StepFailed(f"step {run.name!r} failed: its process could not be started: "
                         f"{err}") from err


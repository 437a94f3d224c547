"""How a local run stops: the errors a step ends with, SIGTERM and SIGHUP taken as Ctrl-C, and
stopping a step's process.

Ctrl-C: a terminal sends SIGINT to the runner and its step processes alike; SIGINT may also
reach the runner alone (a CI job cancelled, ``kill -INT``). Either way the executor stops the
step's process cleanly (:func:`stop_process`: it waits for it to exit, then sends SIGINT, then
SIGTERM, then SIGKILL, each after a grace period), keeps its last output in the log, and
raises :class:`StepInterrupted`.

What helps after a failed step (:func:`failure_cause`): the runner tells, from the exit status
and the step's log, a failure the pipeline file caused (its code on the traceback, or data it
declares wrongly: a new run once the file is fixed, since ``--resume`` continues a run as it
was declared) from one outside it (a full disk, a lost connection, a crash: ``--resume``
continues the run), and says when it cannot tell.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
import subprocess
import threading
from pathlib import Path

__all__ = ["StepFailed", "StepInterrupted", "Terminated", "Stops", "stop_like_ctrl_c",
           "stop_process", "STOP_GRACE_S", "FailureCause", "failure_cause", "DECLARATION",
           "OUTSIDE", "UNKNOWN"]

# After Ctrl-C, the seconds a step's process gets to exit on its own (a terminal sent it SIGINT
# too), then after SIGINT from the runner, then after SIGTERM, before SIGKILL.
STOP_GRACE_S = (2.0, 10.0, 5.0)


class StepFailed(RuntimeError):
    """A step's process exited with an error; the message names the step and its log
    (``returncode``: its exit status, when known)."""

    returncode: int | None = None


class StepInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a step: its process has exited (``step``: the step's name)."""

    def __init__(self, step: str) -> None:
        super().__init__(f"step {step!r} was interrupted")
        self.step = step


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP reached the runner (a scheduler's timeout, ``kill``, a closed
    terminal): the run stops as after Ctrl-C, except that the step's process, which got no
    signal, is sent SIGINT at once (``signum``: the signal)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


class Stops:
    """What :func:`stop_like_ctrl_c` caught: ``signum``, the last SIGTERM or SIGHUP (None:
    none)."""

    signum: int | None = None


@contextlib.contextmanager
def stop_like_ctrl_c():
    """Within this block, SIGTERM and SIGHUP raise :class:`Terminated` in the main thread, as
    Ctrl-C raises KeyboardInterrupt: the running step is stopped, the run recorded as
    interrupted and the way to continue said (a process killed outright can do none of it).
    The handlers before are put back after. Outside the main thread, nothing changes."""
    stops = Stops()
    if threading.current_thread() is not threading.main_thread():
        yield stops
        return

    def handler(signum, frame):
        stops.signum = signum
        raise Terminated(signum)

    before = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield stops
    finally:
        for number, previous in before.items():
            signal.signal(number, previous)


def stop_process(proc: subprocess.Popen, log, why: KeyboardInterrupt | None = None) -> None:
    """Stop ``proc`` after Ctrl-C (see the module docstring), or after ``why``, a
    :class:`Terminated`, its remaining output still going to ``log``; a second Ctrl-C
    (or signal) kills it at once.

    A process that got no signal itself (a detached warm process, or any after a signal to the
    runner alone) is sent one at once: SIGINT, or SIGTERM when it ignores SIGINT (the runner
    inherited an ignored SIGINT, as a background job of a non-interactive shell does, and its
    step processes with it), since waiting for it to obey SIGINT would be waiting for it to
    finish."""
    drain = threading.Thread(target=_drain, args=(proc, log), daemon=True)
    drain.start()
    terminated = isinstance(why, Terminated)
    detached = getattr(proc, "detached", False)
    first = None
    if terminated or detached:
        deaf = not detached and signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        first = signal.SIGTERM if deaf else signal.SIGINT
    sent = []
    try:
        for send, grace in zip((first, signal.SIGINT, signal.SIGTERM), STOP_GRACE_S,
                               strict=True):
            if send is not None and proc.poll() is None:
                proc.send_signal(send)
                sent.append(send.name)
            try:
                proc.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        else:
            proc.kill()
            sent.append("SIGKILL")
            proc.wait()
    except KeyboardInterrupt:
        proc.kill()
        sent.append("SIGKILL")
        proc.wait()
    drain.join(timeout=2.0)
    cause = why.name if terminated else "Ctrl-C"
    how = f"sent {', then '.join(sent)}" if sent else "it exited by itself"
    log.write(f"[estflow] interrupted ({cause}): the step's process was stopped ({how}; "
              f"exit code {proc.returncode})\n")
    log.flush()


def _drain(proc: subprocess.Popen, log) -> None:
    try:
        for line in proc.stdout:
            log.write(line)
    except (OSError, ValueError):  # closed under us: the runner is leaving
        pass



# --- what helps after a failed step -------------------------------------------------------------

DECLARATION, OUTSIDE, UNKNOWN = "declaration", "outside", "unknown"

_EXIT_DATA = 4  # the data checks' exit status (ingest's rejected rows, validate's anomalies)

_OUTSIDE = re.compile(
    r"No space left on device|Disk quota exceeded|Connection reset|"
    r"Connection refused|Connection aborted|Temporary failure in name resolution|"
    r"Name or service not known|Network is unreachable|ServiceUnavailable|"
    r"\b503 Service Unavailable|DeadlineExceeded", re.I)
_MEMORY = re.compile(r"MemoryError|Cannot allocate memory|ResourceExhausted|OOM when allocating|"
                     r"out of memory", re.I)
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
_LOG_READ = 1 << 18  # the most bytes of a step's log searched for the pipeline's own frames


@dataclasses.dataclass(frozen=True)
class FailureCause:
    """Why a step failed, as far as the runner can tell, and so what helps.

    ``kind``: :data:`DECLARATION` (the pipeline file: its code raised, or its declaration does
    not fit the data; once the file is fixed a new run helps, ``--resume`` would run the old
    declaration again), :data:`OUTSIDE` (not the file: a full disk, a lost connection, a
    crash, a stopped process; ``--resume`` continues the run) or :data:`UNKNOWN` (either;
    out of memory is here: other processes, or a batch too big). ``detail``: what was seen,
    e.g. ``p.py:12, in big_tipper`` (``frame``: the pipeline's own traceback frame) or ``No
    space left on device``."""

    kind: str
    detail: str = ""
    frame: bool = False  # detail is the pipeline's own traceback frame


def _tail(message: str) -> str:
    """The step's last lines, as a :class:`StepFailed` message shows them."""
    head, _, rest = message.partition("last lines:\n")
    return rest.rpartition("\nfull log:")[0] if rest else head


def _log_of(message: str) -> str:
    """The end of the step's log the message names ("" when there is none to read)."""
    found = re.search(r"^full log: (.+)$", message, re.M)
    if not found:
        return ""
    try:
        with open(found.group(1), "rb") as log:
            log.seek(max(0, os.fstat(log.fileno()).st_size - _LOG_READ))
            return log.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _own_frame(text: str, pipeline_file: Path) -> str | None:
    """The innermost traceback frame of ``text`` in the pipeline file or a module beside it,
    as ``file:line, in function`` (None: none)."""
    folder = pipeline_file.resolve().parent
    found = None
    for match in _FRAME.finditer(text):
        path = Path(match.group(1))
        with contextlib.suppress(OSError, ValueError):
            if path.is_absolute() and path.resolve().parent == folder:
                shown = os.path.relpath(path) if path.resolve().is_relative_to(Path.cwd()) \
                    else str(path)
                found = f"{shown}:{match.group(2)}, in {match.group(3)}"
    return found


def failure_cause(err: StepFailed, pipeline_file: str | Path | None) -> FailureCause:
    """What a failed step's exit status and log say of its cause (see :class:`FailureCause`).

    In order: the runner's own write failing (an ``OSError`` on ``err.error``: the disk), the
    data checks' exit status 4 (the data or its declaration), a process stopped by a signal
    (SIGKILL, the out-of-memory killer's: unknown; another: outside), a full disk or a lost
    connection in its last lines (outside), running out of memory (unknown), a traceback
    through the pipeline file or a module beside it (declaration, naming the innermost such
    frame); else unknown."""
    error = getattr(err, "error", None)
    if isinstance(error, OSError):
        return FailureCause(OUTSIDE, error.strerror or str(error))
    code = getattr(err, "returncode", None)
    if code == _EXIT_DATA:
        return FailureCause(DECLARATION, "the data does not fit its declaration")
    signum = -code if code is not None and code < 0 else \
        code - 128 if code is not None and 128 < code < 160 else None
    if signum is not None:
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"signal {signum}"
        if signum == signal.SIGKILL:
            return FailureCause(UNKNOWN, f"its process was killed ({name}: what the system's "
                                "out-of-memory killer sends)")
        return FailureCause(OUTSIDE, f"its process was stopped by {name}")
    tail = _tail(str(err))
    if (seen := _OUTSIDE.search(tail)) is not None:
        return FailureCause(OUTSIDE, seen.group(0))
    if (seen := _MEMORY.search(tail)) is not None:
        return FailureCause(UNKNOWN, f"out of memory ({seen.group(0)})")
    if pipeline_file is not None:
        frame = _own_frame(_log_of(str(err)) or tail, Path(pipeline_file))
        if frame is not None:
            return FailureCause(DECLARATION, frame, frame=True)
    return FailureCause(UNKNOWN)

"""How a local run stops: the errors a step ends with, SIGTERM and SIGHUP taken as Ctrl-C, and
stopping a step's process.

Ctrl-C: a terminal sends SIGINT to the runner and its step processes alike; SIGINT may also
reach the runner alone (a CI job cancelled, ``kill -INT``). Either way the executor stops the
step's process cleanly (:func:`stop_process`: it waits for it to exit, then sends SIGINT, then
SIGTERM, then SIGKILL, each after a grace period), keeps its last output in the log, and
raises :class:`StepInterrupted`.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading

__all__ = ["StepFailed", "StepInterrupted", "Terminated", "Stops", "stop_like_ctrl_c",
           "stop_process", "STOP_GRACE_S"]

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


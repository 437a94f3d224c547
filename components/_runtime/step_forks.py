"""Steps' processes forked from one process that imported them: for a step that runs other
steps' entry points many times (the tune step: a train and an evaluate process per trial), so
that TensorFlow and the steps' modules are imported once per search instead of once per
process (about 5 s of CPU each here, more than a taxi trial's training).

:class:`StepForks` uses Python's own fork server (:mod:`multiprocessing`'s ``forkserver``
context): a process started once, which imports the steps' entry modules (their
``__main__``, and the modules they name to import later, :data:`~.prestart.LATER`) and forks a
child per request. Each child is that step's process as ``python -m MODULE ARGS`` would be: its
output (stdout and stderr) where the caller says, its environment and working directory, its
exit status (a negative one when a signal ended it), NumPy's generator reseeded; and it dies
with the server, which ends when the calling process does (Linux: ``PR_SET_PDEATHSIG``), so a
killed search leaves no trial behind.

A process whose environment differs from the server's (beyond TensorFlow's thread counts,
read when its runtime starts, not at import) is not forked: :meth:`StepForks.start` returns
None and the caller starts it plainly. So does any failure to start the server or to fork.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import warnings
from collections.abc import Mapping
from collections.abc import Sequence
from multiprocessing import forkserver
from multiprocessing import reduction
from typing import IO

from estflow.components._runtime.prestart import later_imports
from estflow.components._runtime.prestart import run_main

__all__ = ["StepForks", "ForkedStep", "THREAD_ENV", "die_with_parent"]

THREAD_ENV = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")
"""What may differ between a forked process's environment and the server's."""


class _Fd:
    """A file descriptor handed to the forked child (duplicated into it when the request is
    sent, as :mod:`multiprocessing` hands over a connection)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self):
        return _detach, (reduction.DupFd(self.fd),)


def _detach(dup) -> int:
    return dup.detach()


def _same_but_threads(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    return all(a.get(k) == b.get(k) for k in (set(a) | set(b)) - set(THREAD_ENV))


def _prctl():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()  # looked up once: a child between fork and exec must not load a library


def die_with_parent() -> None:
    """SIGKILL this process when its parent ends (Linux: ``PR_SET_PDEATHSIG``; elsewhere a
    child outlives a killed parent), at once if it already has: in a forked step's child, and
    as the ``preexec_fn`` of a step process started plainly."""
    parent = os.getppid()
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


def _step(module: str, args: list[str], env: dict[str, str], cwd: str | None,
          out: int) -> None:
    """In the forked child: run step ``module`` with ``args`` as ``python -m`` would."""
    die_with_parent()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    if cwd is not None:
        os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    numpy = sys.modules.get("numpy")
    if numpy is not None:  # a fresh process seeds it from the OS; a fork would share its state
        with contextlib.suppress(Exception):
            numpy.random.seed()
    sys.argv = [module, *args]
    with warnings.catch_warnings():  # the server imported the module's __main__ already
        warnings.filterwarnings("ignore", message=".*found in sys.modules after import of "
                                "package", category=RuntimeWarning)
        code = run_main(module)
    os._exit(code & 0xFF if code >= 0 else 1)


class ForkedStep:
    """A forked step's process, driven as the :class:`subprocess.Popen` a plain start gives
    (``stdout``: the read end of its output pipe, or None when its output went to a file)."""

    def __init__(self, process: multiprocessing.process.BaseProcess, stdout: IO[str] | None,
                 args: Sequence[str]) -> None:
        self._process, self.stdout, self.args = process, stdout, list(args)
        self.pid = process.pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._process.exitcode
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self.poll() is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def _start_with(env: Mapping[str, str]) -> None:
    """Start :mod:`multiprocessing`'s fork server with ``env`` (it takes this process's)."""
    saved = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update(env)
        forkserver.ensure_running()
    finally:
        os.environ.clear()
        os.environ.update(saved)


# The process's one fork server (multiprocessing's): the environment it was started with.
_SERVER: dict = {"lock": threading.Lock(), "env": None}


class StepForks:
    """Forks the processes of the steps ``modules`` (entry-point modules) from one server
    that imported them, started by :meth:`prepare` (or the first :meth:`start`)."""

    def __init__(self, modules: Sequence[str], env: Mapping[str, str]) -> None:
        self.modules = tuple(dict.fromkeys(modules))
        self.env = dict(env)
        self._context = None
        self._broken = False

    def prepare(self):
        """Start the server now, if it is not running (it imports while the caller goes on),
        with :attr:`env` (thread counts aside): the environment of the processes it forks.
        Call it before this process starts threads (the environment is swapped while the
        server starts). Returns the forkserver context; None when the server cannot start.
        The server is this process's one (:mod:`multiprocessing` keeps one): the first
        caller's modules and environment are its own."""
        with _SERVER["lock"]:
            if self._context is None and not self._broken:
                try:
                    context = multiprocessing.get_context("forkserver")
                    if _SERVER["env"] is None:
                        preload = [f"{m}.__main__" for m in self.modules]
                        for module in self.modules:
                            with contextlib.suppress(Exception):
                                preload += later_imports(module)
                        context.set_forkserver_preload(list(dict.fromkeys(preload)))
                        server_env = {k: v for k, v in self.env.items() if k not in THREAD_ENV}
                        _start_with(server_env)
                        _SERVER["env"] = server_env
                    self._context = context
                except (ValueError, OSError):
                    self._broken = True
            return self._context

    def start(self, module: str, args: Sequence[str], env: Mapping[str, str],
              output: IO | int, cwd: str | None = None) -> ForkedStep | None:
        """Step ``module``'s process with ``args``, forked; its output to the file ``output``
        or, for ``subprocess.PIPE``, to a pipe its ``stdout`` reads. None: not forked (start
        it plainly): ``env`` differs from this process's beyond the thread counts, or the
        server could not start or fork."""
        if module not in self.modules or self.prepare() is None \
                or not _same_but_threads(env, _SERVER["env"]):
            return None
        if output == subprocess.PIPE:
            read, write = os.pipe()
        else:
            read, write = None, os.dup(output.fileno())
        try:
            process = self._context.Process(
                target=_step, name=f"estflow-step-{module}", daemon=False,
                args=(module, list(args), dict(env), cwd, _Fd(write)))
            process.start()
        except (OSError, ValueError, EOFError):  # the server died or could not start
            self._broken = True
            if read is not None:
                os.close(read)
            return None
        finally:
            os.close(write)
        return ForkedStep(process, os.fdopen(read, "r") if read is not None else None,
                          [module, *args])

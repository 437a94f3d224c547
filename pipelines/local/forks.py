"""A run's fork server (:class:`ForkServer`), the runner's side of
:mod:`estflow.components._runtime.fork_server`: one process per run imports what the steps
import, once, and each step's process is forked from it instead of importing them again (7 s of
CPU a step here; a taxi run's five steps spent 25 of their 50 CPU seconds importing).

The :class:`~estflow.pipelines.local.prestart.Prestarter` starts it beside the run's first step
and takes the later steps' processes from it (:meth:`ForkServer.fork`); a forked process is
driven as a warm one is (:class:`~estflow.pipelines.local.warm.WarmProcess`: arguments,
environment and output handed over a Unix socket, its exit status reported back), with the same
output, log, exit status and Ctrl-C handling as a plain start. It stays in the runner's process
group, so a terminal's Ctrl-C reaches it as it reaches a plain step. A step whose environment
differs from the server's beyond its TensorFlow thread counts (read when TensorFlow's runtime
starts, not at import), or any step when the server could not start or fork, starts plainly.
``ESTFLOW_FORK=0`` turns the fork server off.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

from estflow.pipelines.local.schedule import THREAD_ENV
from estflow.pipelines.local.step_env import FORK_ENV
from estflow.pipelines.local.warm import WarmProcess

__all__ = ["FORK_ENV", "FORK_SERVER_MODULE", "ForkServer", "ForkedProcess", "fork_server_on"]

FORK_SERVER_MODULE = "estflow.components._runtime.fork_server"


def fork_server_on(env: Mapping[str, str]) -> bool:
    """Whether runs fork their steps' processes (``$ESTFLOW_FORK``, ``env``'s else the
    process's; on unless ``0``)."""
    return env.get(FORK_ENV, os.environ.get(FORK_ENV, "1")).strip() != "0"


class ForkedProcess(WarmProcess):
    """A step's process forked by the run's fork server: driven as a warm process, but in the
    runner's process group (a terminal's Ctrl-C reaches it as it reaches a plain start)."""

    detached = False


def _same_but_threads(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    keys = (set(a) | set(b)) - set(THREAD_ENV)
    return all(a.get(k) == b.get(k) for k in keys)


class ForkServer:
    """The run's fork server, started at once with ``full_env`` (a step's whole environment,
    :func:`~estflow.pipelines.local.step_env.full_env`) importing what ``modules`` import.

    Args:
        modules: the entry-point modules of the steps it will fork.
        full_env: its environment; a step whose environment differs (beyond its thread
            counts) is not forked.
    """

    def __init__(self, modules: list[str], full_env: Mapping[str, str]) -> None:
        self.env = dict(full_env)
        self._dir = tempfile.mkdtemp(prefix="estflow-forks-")  # 0o700: the user's only
        self.path = Path(self._dir) / "forks.sock"
        self._ready: bool | None = None
        self._lock = threading.Lock()  # one reader of the ready pipe; the one closing it
        read, write = os.pipe()
        try:
            self._proc = subprocess.Popen(
                (sys.executable, "-m", FORK_SERVER_MODULE, "--ready-fd", str(write),
                 str(self.path), *dict.fromkeys(modules)),
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env=self.env, pass_fds=(write,))
        except OSError:
            os.close(read)
            self._proc, self._ready_fd, self._ready = None, None, False
        else:
            self._ready_fd = read
        finally:
            os.close(write)

    def ready(self) -> bool:
        """Wait until the server has imported and listens; whether it does (False: it could
        not start, its imports left a thread running, or it exited)."""
        with self._lock:
            if self._ready is None:
                with contextlib.suppress(OSError):
                    os.read(self._ready_fd, 1)  # end of file: it is ready, or it exited
                os.close(self._ready_fd)
                self._ready_fd = None
                self._ready = self._proc.poll() is None and self.path.exists()
            return self._ready

    def fork(self, module: str, full_env: Mapping[str, str]) -> ForkedProcess | None:
        """A process for a step of ``module`` with ``full_env``, forked (waits until the
        server is ready); None when the server cannot give one (start the step plainly)."""
        if not _same_but_threads(full_env, self.env) or not self.ready():
            return None
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(str(self.path))
            conn.sendall(json.dumps({"module": module}).encode() + b"\n")
        except OSError:
            conn.close()
            return None
        proc = ForkedProcess(conn, full_env)
        if not proc.accepted(timeout=30.0):
            conn.close()
            return None
        return proc

    def close(self) -> None:
        """Stop the server (the steps it forked are not its to stop) and remove its socket:
        one still importing is killed, one ready leaves at the end of its stdin."""
        if self._proc is not None:
            if self._ready is None:
                self._proc.kill()
            with contextlib.suppress(OSError):
                self._proc.stdin.close()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self.ready()  # its pipe at its end now: closed
        shutil.rmtree(self._dir, ignore_errors=True)

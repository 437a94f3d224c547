"""Warm processes: a step's imports done before its run starts.

A run that succeeds may leave (:func:`spawn_warm`), for some of the steps it ran, a process
that has imported the step's libraries and waits for the next run on a private Unix socket
(:func:`warm_socket`); the next run with the same Python, estflow code and import environment
takes it (:func:`claim_warm`) and drives it as a prestarted process (:class:`WarmProcess`).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from estflow.pipelines.local.step_env import FORK_ENV
from estflow.pipelines.local.step_env import PRESTART_MODULE
from estflow.pipelines.local.step_env import full_env

__all__ = ["WARM_ENV", "WARM_AT_A_TERMINAL", "WARM_STEPS", "warm_seconds", "warm_socket",
           "spawn_warm", "stop_warm", "claim_warm", "WarmProcess"]


WARM_ENV = "ESTFLOW_WARM"
"""Seconds the warm processes a run leaves wait for the next run (0: none). Unset:
:data:`WARM_AT_A_TERMINAL` when the runner's input and output are a terminal (someone
iterating), else 0 (scripts, CI, pods leave nothing behind)."""
WARM_AT_A_TERMINAL = 600.0
WARM_STEPS = 3
"""A run leaves warm processes for at most this many of the steps it ran."""
# The environment that shapes what a process imports: a warm process serves a run whose
# values of these are its own (it takes the rest of that run's environment as it is).
_IMPORT_ENV = ("TF_", "KERAS_", "CUDA", "LD_", "PYTHON", "OMP_", "MKL_", "XLA_", "ESTFLOW_")
_NOT_IMPORT_ENV = {"ESTFLOW_PRESTART", FORK_ENV, WARM_ENV}


def warm_seconds(env: Mapping[str, str]) -> float:
    """``$ESTFLOW_WARM`` (``env``'s, else the process's) in seconds; unset: see
    :data:`WARM_ENV`.

    Raises:
        ValueError: not a number of seconds.
    """
    text = env.get(WARM_ENV, os.environ.get(WARM_ENV, "")).strip()
    if not text:
        return WARM_AT_A_TERMINAL if sys.stdin.isatty() and sys.stdout.isatty() else 0.0
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if seconds < 0:
        raise ValueError(f"{WARM_ENV}: expected a number of seconds (0 or unset: no warm "
                         f"processes). Received {text!r}")
    return seconds


def _warm_dir() -> Path | None:
    """This user's directory of warm sockets (None when it is not private to the user)."""
    folder = Path(tempfile.gettempdir()) / f"estflow-warm-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = folder.stat()
    except OSError:
        return None
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None
    return folder


def _code_digest() -> str:
    """Changes when a file of estflow's packages does (its path, size and modification time)."""
    digest = hashlib.sha256()
    for package in ("dsl", "components", "pipelines"):
        spec = importlib.util.find_spec(f"estflow.{package}")
        for root in (spec.submodule_search_locations or []) if spec else []:
            for path in sorted(Path(root).rglob("*.py")):
                info = path.stat()
                digest.update(f"{path}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def warm_socket(module: str, full_env: Mapping[str, str]) -> Path | None:
    """Where the warm process of ``module`` for this Python, estflow code and import
    environment listens (None: no private directory for it)."""
    folder = _warm_dir()
    if folder is None:
        return None
    shaping = sorted((k, v) for k, v in full_env.items()
                     if k.startswith(_IMPORT_ENV) and k not in _NOT_IMPORT_ENV)
    key = json.dumps([sys.executable, module, shaping, _code_digest()])
    return folder / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.sock"


def spawn_warm(steps: list[tuple[str, str]], env: Mapping[str, str],
               seconds: float) -> list[str]:
    """Leave a warm process (``prestart.py``'s ``--listen``) for each (name, module) of
    ``steps`` that has none waiting, in a session of its own: it imports, then waits up to
    ``seconds`` for a run to take it. Returns the names of the steps that got one."""
    full, left, one_each = full_env(env), [], {}
    for name, module in steps:
        one_each.setdefault(module, name)
    for module, name in one_each.items():
        path = warm_socket(module, full)
        if path is None or path.exists():
            continue
        with contextlib.suppress(OSError):
            _SPAWNED.append((path, subprocess.Popen(
                (sys.executable, "-m", PRESTART_MODULE, "--listen", str(path), "--idle",
                 str(seconds), module),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, env=full, start_new_session=True)))
            left.append(name)
    return left


_SPAWNED: list[tuple[Path, subprocess.Popen]] = []
"""The warm processes this process started, with their sockets (:func:`stop_warm` ends those
still importing)."""


class _WarmInput:
    """What the runner writes the step's arguments to (a prestarted process's stdin)."""

    def __init__(self, owner: WarmProcess) -> None:
        self._owner = owner

    def write(self, line: str) -> None:
        self._owner.start(json.loads(line))

    def close(self) -> None:
        pass


class WarmProcess:
    """A warm process claimed for a step, driven like a prestarted ``subprocess.Popen``:
    ``stdin.write`` hands it the arguments (with the step's environment, the working
    directory and the write end of the pipe ``stdout`` reads); the exit status comes on the
    connection; signals go to its pid (it is in a session of its own: a terminal's Ctrl-C
    does not reach it, so :func:`~estflow.pipelines.local.stopping.stop_process` sends it one)."""

    detached = True

    def __init__(self, conn: socket.socket, env: Mapping[str, str]) -> None:
        self._conn, self._env, self._buffer = conn, dict(env), b""
        self.pid: int | None = None
        self.returncode: int | None = None
        self.stdin = _WarmInput(self)
        self.stdout = None
        self.args: list[str] | None = None  # the step's, once handed over

    def accepted(self, timeout: float) -> bool:
        """Whether the warm process took this connection (it answers its pid); a connection
        queued behind another runner's hears nothing and is closed."""
        try:
            reply = self._message(timeout)
        except OSError:
            reply = None
        if reply is None or "pid" not in reply:
            return False
        self.pid = int(reply["pid"])
        return True

    def start(self, args: list[str]) -> None:
        read, write = os.pipe()
        try:
            request = json.dumps({"args": args, "env": self._env, "cwd": os.getcwd()})
            socket.send_fds(self._conn, [request.encode() + b"\n"], [write])
        finally:
            os.close(write)
        self.stdout = os.fdopen(read, "r")
        self.args = list(args)

    def _message(self, timeout: float | None) -> dict | None:
        """The next message on the connection; None at its end (or when ``timeout`` passes:
        then ``_timed_out`` is set)."""
        self._timed_out = False
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([self._conn], [], [], timeout)
            if not ready:
                self._timed_out = True
                return None
            chunk = self._conn.recv(1 << 16)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def wait(self, timeout: float | None = None) -> int:
        while self.returncode is None:
            message = self._message(timeout)
            if message is None and self._timed_out:
                raise subprocess.TimeoutExpired(["warm process", *(self.args or [])], timeout)
            if message is None:  # it left without a status: killed (SIGKILL, OOM)
                self.returncode = -signal.SIGKILL
            elif "exit" in message:
                self.returncode = int(message["exit"])
        return self.returncode

    def poll(self) -> int | None:
        try:
            return self.wait(timeout=0)
        except subprocess.TimeoutExpired:
            return None

    def send_signal(self, sig: int) -> None:
        if self.returncode is None and self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        if self.args is None:  # never given its step: closing the connection ends it
            self._conn.close()
            self.returncode = -signal.SIGKILL
        else:
            self.send_signal(signal.SIGKILL)

    def __enter__(self) -> WarmProcess:
        return self

    def __exit__(self, *exc) -> None:
        if self.stdout is not None:
            self.stdout.close()
        if self.returncode is None and self.args is not None:
            self.wait()
        self._conn.close()


def stop_warm() -> int:
    """End every warm process of this user that waits (each leaves when its connection closes
    before a step is sent) and those this process started that are still importing; returns
    how many."""
    stopped = 0
    spawned, _SPAWNED[:] = list(_SPAWNED), []
    for path, proc in spawned:
        if proc.poll() is None and not path.exists():  # still importing
            proc.terminate()
            stopped += 1
    folder = _warm_dir()
    for path in sorted(folder.glob("*.sock")) if folder else []:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(str(path))
            stopped += 1
        except OSError:  # a process killed before it could remove its socket
            with contextlib.suppress(OSError):
                path.unlink()
        finally:
            conn.close()
    for _, proc in spawned:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
    return stopped


def claim_warm(module: str, full_env: Mapping[str, str]) -> WarmProcess | None:
    """The warm process waiting for ``module`` in this environment, claimed (None if none)."""
    path = warm_socket(module, full_env)
    if path is None or not path.exists():
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(2.0)
    try:
        conn.connect(str(path))
    except OSError:  # a process killed before it could remove its socket
        conn.close()
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    conn.settimeout(None)
    proc = WarmProcess(conn, full_env)
    if not proc.accepted(timeout=5.0):
        conn.close()
        return None
    return proc


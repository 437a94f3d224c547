"""The ways the local runner runs one step, behind one small interface (:class:`Executor`).

* :class:`ProcessExecutor`: the step's entry point in one subprocess, its progress streamed;
* :class:`ClusterExecutor`: the train step as one process per task of a :class:`Topology` on
  localhost ports, each with the TF_CONFIG a Kubeflow TFJob would set (``worker`` tasks under
  MultiWorkerMirroredStrategy, worker 0 the chief that writes the model artifact; ``chief`` +
  ``worker`` + ``ps`` tasks under a parameter-server cluster). The chief's progress is
  streamed; every task logs to the step's directory.

The runner (:mod:`estflow.pipelines.local_runner`) picks one per step; an executor knows
nothing of plans or pipelines, only the :class:`StepRun` it is given (as kfp.local's task
handlers get one task).

Ctrl-C: a terminal sends SIGINT to the runner and its step processes alike; SIGINT may also
reach the runner alone (a CI job cancelled, ``kill -INT``). Either way the executor stops the
step's process cleanly (it waits for it to exit, then sends SIGINT, then SIGTERM, then
SIGKILL, each after a grace period), keeps its last output in the log, and raises
:class:`StepInterrupted`.

Prestarted processes (:class:`Prestarter`): most of a step's start is importing TensorFlow,
Beam and tf.Transform. The runner names the steps it expects to run; a background thread
starts their processes ahead, in order, the first two at once and then one importing at a time
(:mod:`estflow.components._runtime.prestart`: it imports what the step's module imports, then
waits for its arguments). :class:`ProcessExecutor` hands a step its prestarted process when
there is one for the same module and environment, and otherwise starts it plainly; either way
the step's process runs ``python -m <module> ARGS`` with the same output, log, exit status and
Ctrl-C handling. :meth:`Prestarter.close` kills the ones never used.
"""

from __future__ import annotations

import contextlib
import dataclasses
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
import threading
import time
from collections.abc import Callable
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from estflow.dsl.pipeline import Pipeline
from estflow.pipelines._files import naming

__all__ = ["StepFailed", "StepInterrupted", "Terminated", "stop_like_ctrl_c", "StepRun",
           "Executor", "ProcessExecutor", "ClusterExecutor", "Topology", "topology_for", "Prestarter", "PRESTART_MODULE"]

# How many of a failed step's last output lines its error quotes (the log has them all).
_TAIL_LINES = 30
# Added to the runner's environment: unbuffered output, so progress streams as it happens, and
# TensorFlow's C++ logging kept to errors.
_QUIET_ENV = {"PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}


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


@dataclasses.dataclass(frozen=True)
class StepRun:
    """One step to run: its name, its command line, the directory its logs go to (it exists),
    where its progress lines go, and the environment variables it gets beyond the runner's."""

    name: str
    command: tuple[str, ...]
    directory: Path
    echo: Callable[[str], None] = print
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)


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
        _run_process(run, run.directory / "log.txt", run.env, prestarter=self.prestarter)


# -- processes started ahead of their step --------------------------------------------------

PRESTART_MODULE = "estflow.components._runtime.prestart"


def _full_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment of a step's process: the runner's, quieted, plus the step's."""
    return {**os.environ, **_QUIET_ENV, **env}


@dataclasses.dataclass
class _Prestart:
    name: str
    module: str
    proc: subprocess.Popen | None = None
    ready: int | None = None  # read end of the pipe the process closes once it has imported
    state: str = "wanted"  # -> "started" -> "taken" | "dropped"


class Prestarter:
    """Starts the processes of the steps a run expects to run ahead of their turn (see the
    module docstring), in the order given: the first two at once (the first one's import is
    the next step's start; the second one's overlaps it), then one importing at a time (its
    import overlaps the running step's work).

    Args:
        steps: (step name, entry-point module) of the steps expected to run, in order.
        env: the steps' environment beyond the runner's (what :class:`StepRun` gives them).
        limit: at most this many started and not yet taken at once.
        warm: take an earlier run's warm process for a step when one waits
            (:func:`claim_warm`), before starting one.
    """

    def __init__(self, steps: list[tuple[str, str]], env: Mapping[str, str],
                 limit: int = 2, warm: bool = False) -> None:
        self._env = _full_env(env)
        self._limit = limit
        self._warm = warm
        self._items = [_Prestart(name, module) for name, module in steps]
        self._lock = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._start_all, name="estflow-prestart",
                                         daemon=True)
        if self._items:
            self._thread.start()

    def _start_all(self) -> None:
        for index, item in enumerate(self._items):
            with self._lock:
                while not self._closed and sum(
                        1 for i in self._items if i.state == "started") >= self._limit:
                    self._lock.wait()
                if self._closed:
                    return
                if item.state != "wanted":  # taken plainly or dropped before its turn
                    continue
                if self._warm:  # an earlier run's warm process: its imports are done
                    item.proc = claim_warm(item.module, self._env)
                    if item.proc is not None:
                        item.state = "started"
                        continue
                read, write = os.pipe()
                try:
                    item.proc = subprocess.Popen(
                        (sys.executable, "-m", PRESTART_MODULE, "--ready-fd", str(write),
                         item.module),
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, text=True, env=self._env, pass_fds=(write,))
                except OSError:
                    os.close(read)
                    item.state = "dropped"
                    continue
                finally:
                    os.close(write)
                item.ready, item.state = read, "started"
            if index == 0:
                continue
            try:  # wait until it has imported (or exited): one importing at a time
                os.read(read, 1)
            except OSError:
                pass

    def take(self, name: str, command: tuple[str, ...],
             env: Mapping[str, str]) -> subprocess.Popen | None:
        """The prestarted process of step ``name``, given ``command``'s arguments, when it
        can run ``command`` (``python -m <its module> ARGS``) with ``env``; else None (the step
        starts plainly; a prestart of it not begun yet is dropped)."""
        with self._lock:
            item = next((i for i in self._items if i.name == name
                         and i.state in ("wanted", "started")), None)
            if item is None:
                return None
            if item.state == "wanted":
                item.state = "dropped"
                self._lock.notify_all()
                return None
            item.state = "taken"
            self._lock.notify_all()
        proc = item.proc
        fits = (tuple(command[:3]) == (sys.executable, "-m", item.module)
                and _full_env(env) == self._env)
        if fits and proc.poll() is None:
            try:
                proc.stdin.write(json.dumps(list(command[3:])) + "\n")
                proc.stdin.close()
                return proc
            except OSError:  # it died meanwhile
                pass
        _kill(proc)
        return None

    def drop(self, name: str) -> None:
        """Step ``name`` will not run after all (reused): its process, if started, is killed."""
        with self._lock:
            items = [i for i in self._items if i.name == name
                     and i.state in ("wanted", "started")]
            for item in items:
                item.state = "dropped"
            self._lock.notify_all()
        for item in items:
            if item.proc is not None:
                _kill(item.proc)

    def close(self) -> None:
        """Kill every prestarted process not taken (and start no more)."""
        with self._lock:
            self._closed = True
            left = [i for i in self._items if i.state in ("wanted", "started")]
            for item in left:
                item.state = "dropped"
            self._lock.notify_all()
        for item in left:
            if item.proc is not None:
                _kill(item.proc)
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        for item in self._items:
            if item.ready is not None:
                os.close(item.ready)
                item.ready = None

    def __enter__(self) -> Prestarter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for stream in (proc.stdin, proc.stdout):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass


# -- warm processes: a step's imports done before its run starts (opt-in) --------------------

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
_NOT_IMPORT_ENV = {"ESTFLOW_PRESTART", WARM_ENV}


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
    full, left, one_each = _full_env(env), [], {}
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
    does not reach it, so :func:`_stop` sends it one)."""

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


# -- the train step as several processes (multi-worker) ---------------------------------------

@dataclasses.dataclass(frozen=True)
class Topology:
    """The processes the train step runs as: ``workers`` (MultiWorkerMirroredStrategy, or the
    workers of a parameter-server cluster when ``parameter_servers`` > 0, plus a chief)."""

    workers: int = 1
    parameter_servers: int = 0

    @property
    def distributed(self) -> bool:
        return self.workers > 1 or self.parameter_servers > 0

    def tasks(self) -> list[tuple[str, int]]:
        """(TF_CONFIG task type, index), the chief first."""
        if not self.parameter_servers:
            return [("worker", i) for i in range(self.workers)]
        return ([("chief", 0)] + [("worker", i) for i in range(self.workers)]
                + [("ps", i) for i in range(self.parameter_servers)])

    def tf_configs(self) -> list[str]:
        """One TF_CONFIG per task (in :meth:`tasks` order), on free localhost ports."""
        tasks = self.tasks()
        ports = _free_ports(len(tasks))
        cluster: dict[str, list[str]] = {}
        for (kind, _), port in zip(tasks, ports, strict=True):
            cluster.setdefault(kind, []).append(f"localhost:{port}")
        return [json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}})
                for kind, index in tasks]


def topology_for(pipeline: Pipeline, workers: int | None = None) -> Topology:
    """The declared ``run_config.cluster`` (without its evaluator: locally, evaluate is a step),
    with ``workers`` overriding its worker count.

    Raises:
        ValueError: several workers with a single-process strategy (mirrored, tpu).
    """
    cluster = pipeline.run_config.cluster
    topology = Topology(workers or (cluster.workers if cluster else 1),
                        cluster.parameter_servers if cluster else 0)
    strategy = pipeline.run_config.train_distribute
    if topology.workers > 1 and strategy in ("mirrored", "tpu"):
        raise ValueError(f"Received workers={topology.workers} for a pipeline with "
                         f"run_config.train_distribute={strategy!r}, expected 1 worker "
                         "(that strategy runs in one process) or train_distribute None or "
                         "'multi_worker_mirrored'")
    return topology


@dataclasses.dataclass(frozen=True)
class ClusterExecutor:
    """The step once per task of ``topology``: the chief streamed (``log.txt``), the others
    logged (``log-<type>-<index>.txt``). A task that fails stops them all."""

    topology: Topology

    def execute(self, run: StepRun) -> None:
        configs, kinds = self.topology.tf_configs(), self.topology.tasks()
        run.echo(f"    {run.name}: {len(kinds)} processes on localhost ("
                 + ", ".join(f"{k} {i}" for k, i in kinds) + f"); chief = {kinds[0][0]} 0")
        base = _full_env(run.env)
        others: list[_Task] = []
        failed: list[_Task] = []
        try:
            for (kind, index), config in zip(kinds[1:], configs[1:], strict=True):
                log = run.directory / f"log-{kind}-{index}.txt"
                with open(log, "w") as out:  # the child keeps its own handle
                    proc = subprocess.Popen(run.command, stdout=out, stderr=subprocess.STDOUT,
                                            env={**base, "TF_CONFIG": config})
                others.append(_Task(kind, index, proc, log))
            watch = threading.Thread  # a failed task leaves the chief waiting in a collective
            _run_process(run, run.directory / "log.txt", {**run.env, "TF_CONFIG": configs[0]},
                         on_start=lambda chief: watch(target=_watch, args=(chief, others, failed),
                                                      daemon=True).start())
            _finish(others, self.topology, failed)
        except StepFailed:
            if failed:
                task = failed[0]
                raise StepFailed(f"step {run.name!r} failed: task {task.label} exited with code "
                                 f"{task.proc.returncode}; its log: {task.log}") from None
            raise
        finally:
            for task in others:
                if task.proc.poll() is None:
                    task.proc.kill()
                    task.proc.wait()


def _run_process(run: StepRun, log_path: Path, env: Mapping[str, str],
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
            _stop(proc, log, stop)
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
                                text=True, env=_full_env(env))
    except OSError as err:
        raise StepFailed(f"step {run.name!r} failed: its process could not be started: "
                         f"{err}") from err


def _stop(proc: subprocess.Popen, log, why: KeyboardInterrupt | None = None) -> None:
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


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("localhost", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@dataclasses.dataclass
class _Task:
    kind: str
    index: int
    proc: subprocess.Popen
    log: Path

    @property
    def label(self) -> str:
        return f"{self.kind} {self.index}"

    def serves(self, topology: Topology) -> bool:
        """A parameter-server cluster's workers and ps serve until stopped."""
        return topology.parameter_servers > 0 and self.kind in ("worker", "ps")


def _watch(chief: subprocess.Popen, others: list[_Task], failed: list[_Task]) -> None:
    while chief.poll() is None:
        for task in others:
            if task.proc.poll() not in (None, 0):
                failed.append(task)
                chief.kill()
                return
        time.sleep(0.2)


def _finish(others: list[_Task], topology: Topology, failed: list[_Task]) -> None:
    """After the chief succeeded: training workers end with it (servers are stopped)."""
    for task in others:
        if task.serves(topology):
            continue
        try:
            code = task.proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            code = None
        if code != 0:
            failed.append(task)
            raise StepFailed(f"task {task.label} did not finish with the chief")

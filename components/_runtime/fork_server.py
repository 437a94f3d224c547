"""A run's fork server: the steps' imports (TensorFlow, Beam, tf.Transform: 7 s of CPU here)
done once per run instead of once per step.

``python -m estflow.components._runtime.fork_server --ready-fd FD SOCKET MODULE...``

1. imports what each ``MODULE`` (a step's entry point) imports at its top level and what it
   names to import later (:func:`~.prestart.preimport`, :data:`~.prestart.LATER`), on its one
   thread; an import that fails is left for that step's own start to report;
2. listens on the Unix socket ``SOCKET`` (in a directory only its user can enter), then closes
   ``FD`` (the runner's sign that it is ready);
3. for each connection, reads the step's module and forks: the child is that step's process,
   driven exactly as a warm process is (:func:`~.prestart.serve_step`: its pid, then its
   arguments, environment, working directory and output; its exit status reported on the
   connection; by the server, once the child has ended, when it could not: a crash or a
   signal). The server itself runs no step;
4. leaves at the end of its stdin (the runner closed it, or died), removing its socket.

The server forks only while it is the one thread of Python (a library that started a thread at
import would make the children unsafe): otherwise it serves nothing and the runner starts each
step plainly. A forked child reseeds what a fresh process would have seeded differently
(Python's :mod:`random` does so itself; NumPy's global generator here), restores the SIGINT
handling a plain start has, and reads nothing from the server's stdin.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import signal
import socket
import sys
import threading
import time

from estflow.components._runtime.prestart import later_imports
from estflow.components._runtime.prestart import preimport
from estflow.components._runtime.prestart import recv_json
from estflow.components._runtime.prestart import serve_step

__all__ = ["main", "serve_forks"]

# How long the server waits for a connected runner to name the step's module.
_REQUEST_S = 10.0
# How often it looks for children that ended.
_REAP_S = 0.2


def _import_all(modules: list[str]) -> None:
    for module in modules:
        try:
            preimport(module)
            for name in later_imports(module):
                importlib.import_module(name)
        except BaseException:  # noqa: BLE001 - the step's own start reports it
            continue


def _child(conn: socket.socket, module: str, server: int, imported: float, sigint) -> int:
    """In the forked child: become step ``module``'s process for the runner on ``conn``."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    numpy = sys.modules.get("numpy")
    if numpy is not None:  # a fresh process seeds it from the OS; a fork would share its state
        with contextlib.suppress(Exception):
            numpy.random.seed()
    with contextlib.suppress(Exception):
        preimport(module)  # already imported, unless it is not one the server was given
    conn.settimeout(None)
    return serve_step(conn, module, f"[estflow] step process {os.getpid()} forked from the "
                                    f"run's fork server {server} (imports done once for the "
                                    f"run, in {imported:.1f}s)", sigint=sigint)


def serve_forks(path: str, modules: list[str], ready_fd: int | None) -> int:
    """The fork server (module docstring); returns its exit status."""
    given = signal.getsignal(signal.SIGINT)
    sigint = signal.SIG_IGN if given is signal.SIG_IGN else signal.default_int_handler
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the runner stops what it started
    started = time.monotonic()
    _import_all(modules)
    imported = time.monotonic() - started
    if threading.active_count() > 1:  # not safe to fork: the runner starts steps plainly
        if ready_fd is not None:
            os.close(ready_fd)
        return 1
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(8)
    if ready_fd is not None:
        os.close(ready_fd)
    server, children = os.getpid(), {}
    try:
        while True:
            ready, _, _ = select.select([listener, sys.stdin.fileno()], [], [], _REAP_S)
            _reap(children)
            if sys.stdin.fileno() in ready and not os.read(sys.stdin.fileno(), 1 << 10):
                return 0  # the runner is done (or gone)
            if listener not in ready:
                continue
            conn, _ = listener.accept()
            conn.settimeout(_REQUEST_S)
            try:
                request, _ = recv_json(conn)
            except (OSError, ValueError):
                request = None
            if not isinstance(request, dict) or not isinstance(request.get("module"), str):
                conn.close()
                continue
            try:
                pid = os.fork()
            except OSError:
                conn.close()  # the runner hears nothing and starts the step plainly
                continue
            if pid == 0:
                code = 1
                try:
                    listener.close()
                    for other in children.values():
                        other.close()
                    code = _child(conn, request["module"], server, imported, sigint)
                finally:
                    os._exit(code)
            children[pid] = conn
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
        listener.close()
        for conn in children.values():
            conn.close()


def _reap(children: dict[int, socket.socket]) -> None:
    """Report the exit status of each child that ended on its connection (the child reports
    its own first when it leaves through :func:`~.entry.leave`; this one is the runner's
    answer when it did not: a crash or a signal, as ``subprocess`` reports them), and close
    it."""
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.settimeout(1.0)
                conn.sendall(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode()
                             + b"\n")
            conn.close()


def main(argv: list[str]) -> int:
    ready_fd = None
    if len(argv) >= 2 and argv[0] == "--ready-fd":
        ready_fd, argv = int(argv[1]), argv[2:]
    path, *modules = argv
    return serve_forks(path, modules, ready_fd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

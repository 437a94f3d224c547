"""A step's process started ahead of its turn, so that its imports (TensorFlow, Beam,
tf.Transform: seconds) overlap the work of the step before it.

``python -m estflow.components._runtime.prestart [--ready-fd FD] MODULE``

1. imports what ``MODULE`` imports at its top level (its ``import`` statements, read from its
   source; not ``MODULE`` itself), then closes ``FD`` (the runner's sign that it is ready);
2. waits for one line on stdin: a JSON list, the step's arguments;
3. runs ``MODULE`` as ``python -m MODULE ARGS`` does (:func:`runpy.run_module` as
   ``__main__``, ``sys.argv`` set): its exit status, output and signal handling are the
   step's own; only its imports were already done.

The environment is fixed when the process starts, before TensorFlow is imported: the runner
only hands a prestarted process to a step whose environment is the same (else it starts the
step plainly). While it waits, the process ignores Ctrl-C (a terminal's SIGINT reaches the
whole process group; the runner stops what it started) and exits quietly, running nothing,
at the end of stdin (the runner gave it up, or the runner died: no orphan is left waiting).
If an import fails, the process, once given the arguments, replaces itself with a plain
``python -m MODULE ARGS`` (:func:`os.execv`, same process, output and environment), which
reports the error in the step's log as usual.

A *warm* process (``--listen SOCKET --idle SECONDS``, opt-in with ``ESTFLOW_WARM``) outlives
the run that started it, so that the next run's step finds its imports done: started in a
session of its own after a run, it imports, then listens on a Unix socket (created only once
it is ready, in a directory only its user can enter). The first runner to connect sends the
step's arguments, environment and working directory with its output pipe (``SCM_RIGHTS``):
the process removes the socket (one step per process), answers its pid (only the connection
it accepted hears it), runs the step with
that output, environment and directory, and reports the exit status on the connection before
it leaves. No connection within ``SECONDS``: it removes the socket and exits. A connection
that closes before sending arguments (the runner gave it up) ends it too.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import importlib.util
import json
import os
import runpy
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable

from estflow.components._runtime import entry

__all__ = ["LATER", "preimport", "later_imports", "import_later", "main", "serve_warm",
           "serve_step", "run_main", "recv_json"]


LATER = "PRESTART_LATER"
"""A step's ``__main__`` may name, in a top-level ``PRESTART_LATER = ("package.module", ...)``,
modules its step imports only when it needs them (push: TensorFlow, to build the warm-up
requests; a push with nothing to publish never imports it). A prestarted process imports them
on a background thread once it is ready (:func:`import_later`)."""


def _source(module: str):
    """(spec, parsed source) of what ``python -m module`` runs: for a package (a step:
    ``estflow.components.<step>``), its ``__main__``."""
    spec = importlib.util.find_spec(module)
    if spec is not None and spec.submodule_search_locations is not None:
        spec = importlib.util.find_spec(f"{module}.__main__")
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise ImportError(f"no Python source for {module!r}")
    with open(spec.origin, encoding="utf-8") as f:
        return spec, ast.parse(f.read(), spec.origin)


def preimport(module: str) -> None:
    """Execute the top-level ``import`` statements of ``module``'s source (``from __future__``
    aside) in a scratch namespace: what ``python -m module`` would import first (the package's
    ``__init__`` of a step imports nothing heavy)."""
    spec, tree = _source(module)
    imports = [node for node in tree.body
               if isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom)
                                                   and node.module != "__future__")]
    code = compile(ast.Module(body=imports, type_ignores=[]), spec.origin, "exec")
    exec(code, {"__name__": "__prestart__", "__package__": spec.parent})  # noqa: S102


def later_imports(module: str) -> tuple[str, ...]:
    """The modules ``module``'s source names in its top-level :data:`LATER` tuple (read from
    the source, not executed; () when it has none)."""
    _, tree = _source(module)
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == LATER):
            value = ast.literal_eval(node.value)
            return tuple(value) if isinstance(value, (tuple, list)) else ()
    return ()


def import_later(module: str) -> threading.Thread | None:
    """Start importing ``module``'s :func:`later_imports` on a daemon thread (None: it has
    none). The step, once given its arguments, does not wait for them; if it imports one that
    is still being imported, Python's import lock makes it wait for that import to finish. An
    import that fails here, or a declaration that cannot be read, is left for the step's own
    import to report: this never raises."""
    try:
        names = later_imports(module)
    except Exception:  # noqa: BLE001 - an unreadable declaration: nothing imported ahead
        return None
    if not names:
        return None

    def run() -> None:
        for name in names:
            with contextlib.suppress(BaseException):
                importlib.import_module(name)

    thread = threading.Thread(target=run, name="estflow-import-later", daemon=True)
    thread.start()
    return thread


def recv_json(conn: socket.socket, fds: int = 0) -> tuple[dict | None, list[int]]:
    """One newline-terminated JSON message (and up to ``fds`` descriptors); None at EOF."""
    data, received = b"", []
    while not data.endswith(b"\n"):
        chunk, got, _, _ = socket.recv_fds(conn, 1 << 16, fds) if fds else (
            conn.recv(1 << 16), [], 0, None)
        received += got
        if not chunk:
            return None, received
        data += chunk
    return json.loads(data), received


def serve_warm(module: str, path: str, idle: float) -> int:
    """The warm process (module docstring): import ``module``'s imports, serve one step on the
    socket at ``path``, or leave after ``idle`` seconds without a connection."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as while prestarted: the runner stops it
    started = time.monotonic()
    try:
        preimport(module)
    except BaseException:  # noqa: BLE001 - not warm: the next run starts the step plainly
        return 1
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    staging = f"{path}.{os.getpid()}"
    listener.bind(staging)
    os.chmod(staging, 0o600)
    listener.listen(1)
    os.rename(staging, path)  # appears only once the imports are done
    import_later(module)
    ours = os.stat(path).st_ino
    listener.settimeout(idle)
    try:
        conn, _ = listener.accept()
    except TimeoutError:
        conn = None
    finally:
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == ours:  # not a newer warm process's socket
                os.unlink(path)
        listener.close()
    if conn is None:
        return 0
    return serve_step(conn, module, f"[estflow] warm process {os.getpid()}: imports done "
                                    f"{time.monotonic() - started:.0f}s before this step")


def serve_step(conn: socket.socket, module: str, note: str,
               sigint=signal.default_int_handler) -> int:
    """Run one step of ``module`` for the runner at the other end of ``conn`` (a warm process
    that accepted it, or a process forked for it by :mod:`.fork_server`): answer this process's
    pid, receive the step's arguments, environment and working directory with its output
    descriptor, print ``note`` there, run the step as ``python -m module ARGS`` would, and
    report its exit status on ``conn``. Returns 0 when the runner gave the step up first;
    otherwise leaves the process with the step's status (:func:`os._exit`)."""
    conn.sendall(json.dumps({"pid": os.getpid()}).encode() + b"\n")  # taken: by this runner
    request, fds = recv_json(conn, fds=1)
    if request is None or len(fds) != 1:  # given up
        return 0
    (out,) = fds
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])

    def report(code: int) -> None:
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps({"exit": code}).encode() + b"\n")

    entry.BEFORE_EXIT.append(report)
    print(note, flush=True)
    signal.signal(signal.SIGINT, sigint)
    sys.argv = [module, *request["args"]]
    code = run_main(module, interrupted=lambda: report(-signal.SIGINT))
    report(code)
    os._exit(code)


def run_main(module: str, interrupted: Callable[[], None] | None = None) -> int:
    """Run ``module`` as ``python -m module`` does, ``sys.argv`` already set; returns its exit
    status. A Ctrl-C that stops it ends this process as it ends ``python -m``: the traceback,
    then killed by SIGINT (``interrupted`` called first); after the step, Ctrl-C is ignored
    (a late one must not cut its status short). The atexit handlers run, as at the end of
    ``python -m`` (a step's temporary downloads are removed by one), whatever the step's end:
    a return, ``sys.exit``, an exception or Ctrl-C; the caller leaves with ``os._exit``."""
    code = 1
    try:
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            code = 0
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except KeyboardInterrupt:
        traceback.print_exc()
        _at_exit()
        if interrupted is not None:
            interrupted()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:  # noqa: BLE001 - reported as python -m would
        traceback.print_exc()
    _at_exit()
    return code


def _at_exit() -> None:
    """What ``python -m`` runs before it leaves: the atexit handlers, then the output streams
    flushed (a handler's error is printed, as the interpreter prints it)."""
    atexit._run_exitfuncs()  # noqa: SLF001 - what a normal exit runs first
    sys.stdout.flush()
    sys.stderr.flush()


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--listen":
        path, idle, module = argv[1], float(argv[3]), argv[4]
        return serve_warm(module, path, idle)
    ready_fd = None
    if len(argv) >= 2 and argv[0] == "--ready-fd":
        ready_fd, argv = int(argv[1]), argv[2:]
    (module,) = argv
    # What a plain ``python -m`` has: Python's KeyboardInterrupt handler, or SIG_IGN when the
    # process inherited an ignored SIGINT (e.g. a background job of a non-interactive shell).
    given = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        preimport(module)
        imported = True
    except BaseException:  # noqa: BLE001 - the plain start below reports it
        imported = False
    if ready_fd is not None:
        os.close(ready_fd)
    if imported:
        import_later(module)
    line = sys.stdin.readline()
    if not line.strip():  # given up
        os._exit(0)
    args = json.loads(line)
    if not imported:  # the step as a plain start would run it (SIGINT as a fresh process's)
        signal.signal(signal.SIGINT, signal.SIG_IGN if given is signal.SIG_IGN
                      else signal.SIG_DFL)
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, "-m", module, *args])
    signal.signal(signal.SIGINT, given)
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

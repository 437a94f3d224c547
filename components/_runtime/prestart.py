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
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import runpy
import signal
import sys

__all__ = ["preimport", "main"]


def preimport(module: str) -> None:
    """Execute the top-level ``import`` statements of ``module``'s source (``from __future__``
    aside) in a scratch namespace: what ``python -m module`` would import first."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise ImportError(f"no Python source for {module!r}")
    with open(spec.origin, encoding="utf-8") as f:
        tree = ast.parse(f.read(), spec.origin)
    imports = [node for node in tree.body
               if isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom)
                                                   and node.module != "__future__")]
    code = compile(ast.Module(body=imports, type_ignores=[]), spec.origin, "exec")
    exec(code, {"__name__": "__prestart__", "__package__": spec.parent})  # noqa: S102


def main(argv: list[str]) -> int:
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

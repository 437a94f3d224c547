"""Prestarted processes (:class:`Prestarter`): most of a step's start is importing TensorFlow,
Beam and tf.Transform. The runner names the steps it expects to run; a background thread
starts their processes ahead, in order, the first two at once and then one importing at a time
(:mod:`estflow.components._runtime.prestart`: it imports what the step's module imports, then
waits for its arguments). With a fork server (:mod:`estflow.pipelines.local.forks`), started
beside the first step, the later steps' processes are forked from it instead: their imports
are done once for the whole run. :class:`~estflow.pipelines.local.processes.ProcessExecutor` hands a step
its prestarted process when there is one for the same module and environment, and otherwise
starts it plainly. :meth:`Prestarter.close` kills the ones never used.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
from collections.abc import Mapping

from estflow.pipelines.local.forks import ForkServer
from estflow.pipelines.local.step_env import PRESTART_MODULE
from estflow.pipelines.local.step_env import full_env
from estflow.pipelines.local.warm import claim_warm

__all__ = ["Prestarter"]


@dataclasses.dataclass
class _Prestart:
    name: str
    module: str
    env: dict[str, str]  # its whole environment (full_env)
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
        step_env: a step's environment beyond ``env`` (its share of the cores), by name.
        fork: start a fork server for the steps after the first and fork their processes
            from it (:class:`~estflow.pipelines.local.forks.ForkServer`); not with ``warm``.
    """

    def __init__(self, steps: list[tuple[str, str]], env: Mapping[str, str],
                 limit: int = 2, warm: bool = False,
                 step_env: Mapping[str, Mapping[str, str]] | None = None,
                 fork: bool = False) -> None:
        self._limit = limit
        self._warm = warm
        self._items = [_Prestart(name, module, full_env({**env, **(step_env or {}).get(name, {})}))
                       for name, module in steps]
        self._forks = (ForkServer([i.module for i in self._items[1:]], full_env(env))
                       if fork and not warm and len(self._items) >= 2 else None)
        # (a run that takes warm processes has their imports done already: no fork server)
        self._lock = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._start_all, name="estflow-prestart",
                                         daemon=True)
        if self._items:
            self._thread.start()

    def _start_all(self) -> None:
        for index, item in enumerate(self._items):
            forks = self._forks if index > 0 and self._forks is not None else None
            if forks is not None and not forks.ready():  # waits for its imports
                forks = None
            with self._lock:
                while not self._closed and sum(
                        1 for i in self._items if i.state == "started") >= self._limit:
                    self._lock.wait()
                if self._closed:
                    return
                if item.state != "wanted":  # taken plainly or dropped before its turn
                    continue
                if self._warm:  # an earlier run's warm process: its imports are done
                    item.proc = claim_warm(item.module, item.env)
                    if item.proc is not None:
                        item.state = "started"
                        continue
                if forks is not None:
                    item.proc = forks.fork(item.module, item.env)
                    if item.proc is not None:  # its imports are done: no need to wait
                        item.state = "started"
                        continue
                read, write = os.pipe()
                try:
                    item.proc = subprocess.Popen(
                        (sys.executable, "-m", PRESTART_MODULE, "--ready-fd", str(write),
                         item.module),
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, text=True, env=item.env, pass_fds=(write,))
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
            fork = (item.state == "wanted" and self._forks is not None
                    and item is not self._items[0])
            if item.state == "wanted" and not fork:
                item.state = "dropped"
                self._lock.notify_all()
                return None
            item.state = "taken"
            self._lock.notify_all()
        fits = (tuple(command[:3]) == (sys.executable, "-m", item.module)
                and full_env(env) == item.env)
        if fork:  # its turn came before the server's imports were done: they will be first
            item.proc = self._forks.fork(item.module, item.env) if fits else None
            if item.proc is None:
                return None
        proc = item.proc
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
        if self._forks is not None:  # one still importing is killed: the thread stops waiting
            self._forks.close()
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

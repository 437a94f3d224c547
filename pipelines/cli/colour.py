"""Colour for the verdicts ``estflow`` echoes: BLESSED in green, NOT BLESSED and ANOMALY in
red, when the output is a terminal and ``NO_COLOR`` is unset (https://no-color.org's
convention). A pipe, a file and the steps' logs get the words alone: a step writes its log
itself, uncoloured; only the runner's echo of a line to a terminal is painted."""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Callable
from typing import TextIO

__all__ = ["enabled", "paint", "terminal_echo"]

_GREEN, _RED, _RESET = "\033[1;32m", "\033[1;31m", "\033[0m"
# Longest first: NOT BLESSED is one verdict, not NOT + BLESSED.
_VERDICTS = re.compile(r"\b(NOT BLESSED|NOT blessed|NOT pushed|BLESSED|ANOMALY)\b")
_COLOURS = {"BLESSED": _GREEN}


def enabled(stream: TextIO) -> bool:
    """Whether lines written to ``stream`` may be coloured: it is a terminal, ``NO_COLOR`` is
    unset or empty, and the terminal is not ``dumb``."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):  # a closed stream
        return False


def paint(line: str) -> str:
    """``line`` with each verdict word in its colour (ANSI escapes)."""
    return _VERDICTS.sub(lambda m: f"{_COLOURS.get(m.group(1), _RED)}{m.group(1)}{_RESET}",
                         line)


def terminal_echo(stream: TextIO | None = None) -> Callable[[str], None]:
    """An ``echo`` for the runner: ``print`` to ``stream`` (default: stdout), painted when it
    is a terminal (decided per line: a stream redirected later is honoured)."""
    def echo(line: str) -> None:
        out = stream or sys.stdout
        print(paint(line) if enabled(out) else line, file=out)
    return echo


def survive_closed_output(echo: Callable[[str], None], command: str) -> Callable[[str], None]:
    """``echo`` that outlives the reader of stdout (``estflow run ... | head``, a ``tee`` that
    was killed): the first write that finds the pipe closed sends stdout to /dev/null and says
    on stderr that the command goes on (a long run is not lost to its progress lines; each
    step's lines stay in its log and the run's record), instead of failing mid-step."""
    gone = threading.Event()

    def echoed(line: str) -> None:
        if gone.is_set():
            return
        try:
            echo(line)
        except BrokenPipeError:
            gone.set()
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, sys.stdout.fileno())
            os.close(null)
            print(f"{command}: the reader of its output went away; it goes on, writing no more "
                  "progress lines (each step's lines are in its log.txt; `estflow runs show` "
                  "reads the run)", file=sys.stderr)
    return echoed

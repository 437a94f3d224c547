"""TensorFlow's own logging kept out of what a person reads: the C++ start-up lines that
``TF_CPP_MIN_LOG_LEVEL`` does not reach, and tf.Transform's Keras 2 warning.

* :func:`is_noise`: TensorFlow's C++ logging in absl's format (INFO and WARNING records, the
  errors of probing CUDA on a machine without a usable GPU, absl's "before InitializeLog"
  banner). Importing TensorFlow writes them to file descriptor 2 before
  ``TF_CPP_MIN_LOG_LEVEL`` is read (XLA's CUDA stub, ``cuInit``), so only a filter on the
  stream removes them.
* ``python -m estflow.components._runtime.quiet MODULE [ARG ...]``: run ``python -m MODULE
  ARG ...`` with its stderr relayed line by line without :func:`is_noise`'s lines (its stdout
  and stdin are the caller's), until it exits; its exit status is this one's. ``estflow
  predict`` runs its step so, as ``estflow run`` shows only a step's own lines (the rest goes
  to the step's log). The step shares this process's group, so a Ctrl-C at the terminal
  reaches it directly (this process ignores it); a SIGTERM or SIGHUP sent to this process is
  passed on. Either way this process waits for the step and relays its last lines: nothing
  it wrote is lost, and the command ends when the step has.
* :func:`drop_tft_keras_warning`: a process that sets ``TF_USE_LEGACY_KERAS=0`` on purpose
  (the train step keeps the user's Keras 3) is told by tf.Transform on import that it "is
  only compatible with Keras 2", which its own layer handles (it uses the tf_keras package
  either way): that one warning is dropped from the absl logger, nothing else.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys

__all__ = ["is_noise", "relay", "main", "drop_tft_keras_warning", "TFT_KERAS_WARNING"]

_LOG_RECORD = re.compile(r"([IWEF])\d{4} [\d:.]+\s+\d+ (\S+?)\.cc:\d+\] ")
_NOISE_LINES = ("WARNING: All log messages before absl::InitializeLog() is called are written "
                "to STDERR", "To enable the following instructions: ")
_FORWARDED = (signal.SIGTERM, signal.SIGHUP)

TFT_KERAS_WARNING = "Tensorflow Transform is only compatible with Keras 2"
"""What tf.Transform warns on import when ``TF_USE_LEGACY_KERAS`` is set to another value
than 1 (``tensorflow_transform/keras_lib.py``)."""


def is_noise(line: str) -> bool:
    """TensorFlow's C++ start-up logging (absl format): INFO and WARNING records, and the
    errors of probing CUDA on a machine without a usable GPU. Errors otherwise are kept."""
    if line.startswith(_NOISE_LINES):
        return True
    record = _LOG_RECORD.match(line)
    if record is None:
        return False
    level, source = record.groups()
    return level in "IW" or (level == "E" and source.startswith(("cuda_", "cudart_", "gpu_")))


def relay(command: list[str], env: dict[str, str] | None = None) -> int:
    """Run ``command`` with its stderr filtered (see the module docstring); its exit status,
    128 + the signal's number when a signal ended it (as a shell says it)."""
    env = dict(os.environ if env is None else env)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("PYTHONUNBUFFERED", "1")  # its lines as they are written
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, env=env)
    previous = {}

    def forward(signum, _frame) -> None:
        if proc.poll() is None:
            proc.send_signal(signum)

    for signum in _FORWARDED:
        previous[signum] = signal.signal(signum, forward)
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)  # the step's
    try:
        out = sys.stderr.buffer
        for raw in proc.stderr:
            if not is_noise(raw.decode(errors="replace")):
                out.write(raw)
                out.flush()
        code = proc.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 128 - code if code < 0 else code


def main(argv: list[str] | None = None) -> int:
    """``python -m estflow.components._runtime.quiet MODULE [ARG ...]``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print("usage: python -m estflow.components._runtime.quiet MODULE [ARG ...]",
              file=sys.stderr)
        return 2
    return relay([sys.executable, "-m", *argv])


class _DropTftKerasWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return TFT_KERAS_WARNING not in record.getMessage()


def drop_tft_keras_warning() -> None:
    """Drop tf.Transform's Keras 2 warning (:data:`TFT_KERAS_WARNING`) from absl's logger,
    where it logs it; every other record is kept. Idempotent; absl is imported (it is light,
    and configures its own logger class first)."""
    from absl import logging as absl_logging  # noqa: PLC0415

    logger = absl_logging.get_absl_logger()
    if not any(isinstance(f, _DropTftKerasWarning) for f in logger.filters):
        logger.addFilter(_DropTftKerasWarning())


if __name__ == "__main__":
    sys.exit(main())

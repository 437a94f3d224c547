"""The serve step: a local server speaking TF Serving's REST API for the models push published.

``python -m estflow.components.serve BASE_PATH [--port 8501] [--host 127.0.0.1]
[--poll-seconds 2] [--max-body-bytes 10485760] [--threads 16] [--request-timeout-seconds 30]
[--idle-timeout-seconds 60] [--max-connections 256]`` (the options are
:data:`estflow.dsl.contracts.SERVE_OPTIONS`, which ``estflow serve --help`` lists too).

Every subdirectory of BASE_PATH holding integer version directories is a model (push's layout,
``<base>/<model_name>/<version>/``). The highest version of each is loaded at start and served;
a background poll loads newer versions as they are pushed and swaps them in without a restart
(a version that fails to load is logged and the previous one keeps serving). Only the served
(latest) version answers ``/versions/N``; other versions are 404, as with TF Serving's default
version policy. Nothing outside BASE_PATH is read: model directories, versions and files that
resolve outside it (symlinks out) are refused, and reported in the log and the status API.

The API is TF Serving's (see :mod:`estflow.components.serve.rest` for the routes and
:mod:`estflow.components.serve.codec` for the JSON mapping), so the same client code works
against TF Serving or a KServe InferenceService whose ``storageUri`` is the model base path::

    GET  /v1/models/taxi                   {"model_version_status": [{"version": "2", ...}]}
    GET  /v1/models/taxi/metadata          {"model_spec": ..., "metadata": {"signature_def": ...}}
    POST /v1/models/taxi:predict           {"instances": [{"b64": "<serialized tf.Example>"}]}
    POST /v1/models/taxi:predict           {"signature_name": "predict_raw",
                                            "instances": [{"fare": 12.5, "payment_type": ...}]}
    POST /v1/models/taxi:classify          {"examples": [{"fare": 7.25, "payment_type": "Cash"}]}

Connections are served by one event loop and a bounded pool of worker threads (see
:mod:`estflow.components.serve.http` for the limits and timeouts). The command line binds the
port before TensorFlow is imported, so a busy port fails at once, and keeps TensorFlow's and
CUDA's start-up logging out of its output.

Example:
    >>> server = serve("/models")                         # doctest: +SKIP
    >>> urllib.request.urlopen(server.url + "/v1/models/taxi").read()   # doctest: +SKIP
    >>> server.shutdown()                                 # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import re
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from typing import TextIO

from estflow.components.serve.http import HttpServer
from estflow.components.serve.http import Limits
from estflow.components.serve.http import listen
from estflow.dsl.contracts import SERVE_OPTIONS
from estflow.dsl.contracts import add_options

if TYPE_CHECKING:  # they import TensorFlow: loaded by _start, once the port is bound
    from estflow.components.serve.models import ModelRegistry
    from estflow.components.serve.models import ServedModel

__all__ = ["Server", "serve", "main", "DEFAULT_MAX_BODY_BYTES"]

_DEFAULTS = {option.flag.replace("-", "_"): option.default for option in SERVE_OPTIONS}
DEFAULT_MAX_BODY_BYTES: int = _DEFAULTS["max_body_bytes"]

log = logging.getLogger("estflow.serve")


class Server:
    """A running server (HTTP in a background thread, plus the version poll).

    Attributes:
        host: the address it is bound to.
        port: the bound port (the real one when started with ``port=0``).
        url: ``http://host:port``.
    """

    def __init__(self, http: HttpServer, registry: ModelRegistry) -> None:
        self._http = http
        self.registry = registry
        self.host, self.port = http.server_address[:2]
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{host}:{self.port}"
        self._thread = threading.Thread(target=http.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="estflow-serve-http", daemon=True)
        self._thread.start()
        while not http.wait_started(0.1):
            if not self._thread.is_alive():
                raise RuntimeError("the HTTP server thread ended before it started serving")

    def models(self) -> list[ServedModel]:
        """The models being served now, by name."""
        return self.registry.models()

    def shutdown(self) -> None:
        """Stop accepting requests, stop polling, close the socket; idempotent."""
        if self._thread.is_alive():
            self._http.shutdown()
            self._thread.join()
        self.registry.stop()
        self._http.server_close()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()


def serve(base_path: str | Path, host: str = _DEFAULTS["host"], port: int = 0, *,
          poll_seconds: float = _DEFAULTS["poll_seconds"],
          max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
          threads: int = _DEFAULTS["threads"],
          request_timeout_seconds: float = _DEFAULTS["request_timeout_seconds"],
          idle_timeout_seconds: float = _DEFAULTS["idle_timeout_seconds"],
          max_connections: int = _DEFAULTS["max_connections"]) -> Server:
    """Load the models under ``base_path`` and serve them over HTTP from a background thread.

    Args:
        base_path: the push base path: ``<base_path>/<model_name>/<integer version>/``.
        host: address to bind; loopback by default (nothing here authenticates requests).
        port: TCP port; 0 picks a free one (see ``Server.port``).
        poll_seconds: how often to look for newly pushed versions; 0 disables polling.
        max_body_bytes: larger request bodies are refused with 413 without being read.
        threads: worker threads answering complete requests (idle or slow connections hold
            none: one event loop reads them).
        request_timeout_seconds: a request not complete this long after its first byte is
            answered 408; an answer not taken by the client within it is abandoned.
        idle_timeout_seconds: an idle keep-alive connection is closed after this long.
        max_connections: open connections at most; a new one beyond is answered 503.

    Returns:
        The running :class:`Server`; call ``shutdown()`` (or use it as a context manager).

    Raises:
        NotADirectoryError: ``base_path`` is not a directory.
        ValueError: an option is out of range.
        OSError: the address cannot be bound (the message names it).
    """
    base = _base_path(base_path)
    limits = _limits(poll_seconds, max_body_bytes, threads, request_timeout_seconds,
                     idle_timeout_seconds, max_connections)
    listener = listen(host, port)  # bound before TensorFlow is imported or a model loaded
    try:
        return _start(listener, base, limits, poll_seconds)
    except BaseException:
        listener.close()
        raise


def _base_path(base_path: str | Path) -> Path:
    base = Path(base_path).resolve()
    if not base.is_dir():
        raise NotADirectoryError(f"the model base path {str(base)!r} is not a directory")
    return base


def _limits(poll_seconds: float, max_body_bytes: int, threads: int,
            request_timeout_seconds: float, idle_timeout_seconds: float,
            max_connections: int) -> Limits:
    checks = [("poll_seconds", poll_seconds, poll_seconds >= 0, "a number >= 0 (0: no polling)"),
              ("max_body_bytes", max_body_bytes, max_body_bytes > 0, "a positive integer"),
              ("threads", threads, threads > 0, "a positive integer"),
              ("request_timeout_seconds", request_timeout_seconds, request_timeout_seconds > 0,
               "a positive number"),
              ("idle_timeout_seconds", idle_timeout_seconds, idle_timeout_seconds > 0,
               "a positive number"),
              ("max_connections", max_connections, max_connections > 0, "a positive integer")]
    for name, value, ok, expected in checks:
        if not ok or not math.isfinite(value):
            raise ValueError(f"Received an invalid value for `{name}`, expected {expected}. "
                             f"Received: {name}={value}")
    return Limits(max_body_bytes=max_body_bytes, threads=threads,
                  request_timeout=request_timeout_seconds, idle_timeout=idle_timeout_seconds,
                  max_connections=max_connections)


def _start(listener: socket.socket, base: Path, limits: Limits, poll_seconds: float) -> Server:
    """Load the models (this imports TensorFlow) and start serving on ``listener``."""
    from estflow.components.serve.models import ModelRegistry
    from estflow.components.serve.rest import make_app

    registry = ModelRegistry(base)
    registry.refresh()
    if poll_seconds:
        registry.start_polling(poll_seconds)
    return Server(HttpServer(listener, make_app(registry), limits), registry)


def _stop_event() -> threading.Event:
    """An event set by SIGTERM (Ctrl-C raises KeyboardInterrupt as usual)."""
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    return stop


def _wait_for(stop: threading.Event) -> None:
    try:
        while not stop.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass


# -- TensorFlow's start-up noise -----------------------------------------------------------

_LOG_RECORD = re.compile(r"([IWEF])\d{4} [\d:.]+\s+\d+ (\S+?)\.cc:\d+\] ")
_NOISE_LINES = ("WARNING: All log messages before absl::InitializeLog() is called are written "
                "to STDERR", "To enable the following instructions: ")


def _is_noise(line: str) -> bool:
    """TensorFlow's C++ start-up logging (absl format): INFO and WARNING records, and the
    errors of probing CUDA on a machine without a usable GPU. Errors otherwise are kept."""
    if line.startswith(_NOISE_LINES):
        return True
    record = _LOG_RECORD.match(line)
    if record is None:
        return False
    level, source = record.groups()
    return level in "IW" or (level == "E" and source.startswith(("cuda_", "cudart_", "gpu_")))


@contextlib.contextmanager
def _start_up_noise_filtered(out: TextIO) -> Iterator[None]:
    """Send the process's stderr (file descriptor 2, where TensorFlow's C++ code writes) to a
    temporary file while TensorFlow is imported and the models load, then write what is not
    :func:`_is_noise` to ``out`` (a copy of the real stderr)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            text = capture.read().decode(errors="replace")
            kept = [line for line in text.splitlines() if line.strip() and not _is_noise(line)]
            if kept:
                out.write("\n".join(kept) + "\n")
                out.flush()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="estflow.components.serve",
                                     description="Serve pushed models over TF Serving's REST API.")
    parser.add_argument("base_path", metavar="BASE_PATH",
                        help="push base path: BASE_PATH/<model_name>/<integer version>/")
    add_options(parser, SERVE_OPTIONS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        base = _base_path(args.base_path)
        limits = _limits(args.poll_seconds, args.max_body_bytes, args.threads,
                         args.request_timeout_seconds, args.idle_timeout_seconds,
                         args.max_connections)
        listener = listen(args.host, args.port)  # first: a busy port fails before TensorFlow
    except (OSError, ValueError) as e:
        print(f"estflow serve: {e}", file=sys.stderr, flush=True)
        return 2
    stderr = os.fdopen(os.dup(2), "w", buffering=1)  # the real stderr, while fd 2 is captured
    logging.basicConfig(level=logging.INFO, stream=stderr,
                        format="[serve] %(asctime)s %(levelname)s %(message)s")
    try:
        with _start_up_noise_filtered(stderr):
            server = _start(listener, base, limits, args.poll_seconds)
    except (OSError, ValueError) as e:
        listener.close()
        print(f"estflow serve: {e}", file=stderr, flush=True)
        return 2
    stop = _stop_event()  # before the ready line: a client may stop the server at once
    models = ", ".join(f"{m.name}@{m.version}" for m in server.models()) or "none"
    print(f"estflow serve: listening on {server.url} (models: {models})", flush=True)
    try:
        _wait_for(stop)
    finally:
        server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

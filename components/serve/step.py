"""The command line's run (``python -m estflow.components.serve``, ``estflow serve``): bind,
say what loads, load the models with TensorFlow's start-up noise filtered out, print the ready
line, serve until SIGTERM or Ctrl-C, say it stops, shut down."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING

from estflow.components.serve import noise
from estflow.components.serve.http import listen
from estflow.components.serve.metrics import DEFAULT_PATH as METRICS_PATH
from estflow.components.serve.metrics import read_monitoring_config
from estflow.components.serve.server import checked_limits
from estflow.components.serve.server import checked_models
from estflow.components.serve.server import model_folder
from estflow.components.serve.server import start

if TYPE_CHECKING:
    from estflow.components.serve.batching import BatchingParameters

__all__ = ["run"]

log = logging.getLogger("estflow.serve")


def run(base_path: str | None, host: str, port: int, *, poll_seconds: float,
        max_body_bytes: int, model_config_file: str | None = None, model_name: str = "default",
        model_base_path: str | None = None,
        threads: int, request_timeout_seconds: float, idle_timeout_seconds: float,
        max_connections: int, grpc_port: int | None = None,
        monitoring_config_file: str | None = None, enable_batching: bool = False,
        batching_parameters_file: str | None = None) -> int:
    """Serve the models under ``base_path`` until stopped (the options are
    :func:`.server.serve`'s); returns the exit status: 2 when the options, the address or the
    models' loading fail (the message on stderr), else 0 once stopped."""
    try:
        base = checked_models(base_path, model_name=model_name, model_base_path=model_base_path,
                              model_config_file=model_config_file)
        limits = checked_limits(poll_seconds, max_body_bytes, threads, request_timeout_seconds,
                                idle_timeout_seconds, max_connections)
        metrics_path = (read_monitoring_config(monitoring_config_file)
                        if monitoring_config_file else METRICS_PATH)
        batching = _batching(enable_batching, batching_parameters_file)
        listener = listen(host, port)  # first: a busy port fails before TensorFlow
        if grpc_port:  # gRPC binds once TensorFlow is loaded: a busy port fails now all the same
            try:
                listen(host, grpc_port).close()
            except OSError as e:
                listener.close()
                raise OSError(f"gRPC: {e}".replace("--port", "--grpc-port")) from None
    except (OSError, ValueError) as e:
        print(f"estflow serve: {e}", file=sys.stderr, flush=True)
        return 2
    if base_path and isinstance(base, list):  # BASE_PATH is one model's folder
        print(f"estflow serve: {base_path} is one model's folder (version directories "
              f"{', '.join(map(str, sorted(model_folder(base[0].base_path))))}), not a base "
              f"path of models: serving it as model {base[0].name!r} (to serve every model "
              f"pushed beside it, give its parent: estflow serve "
              f"{os.path.dirname(os.path.normpath(base_path)) or '.'})", flush=True)
    stderr = os.fdopen(os.dup(2), "w", buffering=1)  # the real stderr, while fd 2 is captured
    _log_to(stderr)
    log.info("starting: loading TensorFlow, then the models of %s ...",
             base_path or model_base_path or model_config_file)
    try:
        with noise.filtered(stderr):
            server = start(listener, base, limits, poll_seconds, grpc_port=grpc_port,
                           metrics_path=metrics_path, batching=batching)
    except (OSError, ValueError) as e:
        listener.close()
        print(f"estflow serve: {e}", file=stderr, flush=True)
        return 2
    stop = _stop_event()  # before the ready line: a client may stop the server at once
    models = ", ".join(f"{m.name}@{m.version}" for m in server.models()) or "none"
    grpc = f", gRPC on {server.grpc.address}" if server.grpc is not None else ""
    batched = ", batching requests" if batching is not None else ""
    print(f"estflow serve: listening on {server.url}{grpc} (models: {models}){batched}",
          flush=True)
    how = "an error"
    try:
        how = _wait_for(stop)
    finally:
        print(f"estflow serve: stopping ({how}): refusing new connections, finishing the "
              "requests in progress ...", flush=True)
        server.shutdown()
    print("estflow serve: stopped", flush=True)
    return 0


def _log_to(stream) -> None:
    """The server's log (``[serve] TIME LEVEL message``, the ``estflow.serve`` logger) on
    ``stream``; TensorFlow's own Python logging (INFO such as "Restoring parameters",
    deprecation WARNINGs) is left out, as its C++ logging is (TF_CPP_MIN_LOG_LEVEL=2, and
    :mod:`.noise` at start): only its errors are shown."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("[serve] %(asctime)s %(levelname)s %(message)s"))
    serve_log = logging.getLogger("estflow.serve")
    serve_log.handlers[:] = [handler]
    serve_log.setLevel(logging.INFO)
    serve_log.propagate = False
    logging.getLogger("tensorflow").setLevel(logging.ERROR)


def _batching(enable: bool, parameters_file: str | None) -> BatchingParameters | None:
    """The batching parameters (TF Serving's defaults, or its --batching_parameters_file's),
    or None without --enable-batching (a parameters file alone is ignored, as TF Serving
    does, with a warning). ValueError/OSError for a file that cannot be read."""
    from estflow.components.serve.batching import BatchingParameters
    from estflow.components.serve.batching import read_parameters

    if not enable:
        if parameters_file:
            print("estflow serve: warning: --batching-parameters-file is ignored without "
                  "--enable-batching", file=sys.stderr, flush=True)
        return None
    if not parameters_file:
        return BatchingParameters()
    try:
        return read_parameters(parameters_file)
    except OSError as e:
        raise OSError(f"--batching-parameters-file: cannot read {parameters_file}: "
                      f"{e.strerror or e}") from None


def _stop_event() -> threading.Event:
    """An event set by SIGTERM (Ctrl-C raises KeyboardInterrupt as usual)."""
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    return stop


def _wait_for(stop: threading.Event) -> str:
    """Until ``stop`` is set (SIGTERM) or Ctrl-C; returns which, as the stop line says it."""
    try:
        while not stop.wait(1.0):
            pass
    except KeyboardInterrupt:
        return "Ctrl-C"
    return "SIGTERM"

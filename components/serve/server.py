"""The server: HTTP in a background thread over the models under a base path, with the poll
that loads newly pushed versions (:func:`serve`).

The port is bound before TensorFlow is imported (:func:`start` imports it, with the models'
code), so a busy port fails at once.
"""

from __future__ import annotations

import math
import socket
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from estflow.components._io.model_repo import version_dirs
from estflow.components.serve.config import MODEL_NAME_PATTERN
from estflow.components.serve.http import HttpServer
from estflow.components.serve.http import Limits
from estflow.components.serve.http import listen
from estflow.components.serve.metrics import DEFAULT_PATH as METRICS_PATH
from estflow.components.serve.mirror import Mirror
from estflow.dsl.contracts import SERVE_OPTIONS

if TYPE_CHECKING:  # they import TensorFlow: loaded by start, once the port is bound
    from estflow.components.serve.batching import Batcher
    from estflow.components.serve.batching import BatchingParameters
    from estflow.components.serve.grpc_server import GrpcServer
    from estflow.components.serve.metrics import Metrics
    from estflow.components.serve.models import ServedModel
    from estflow.components.serve.registry import ModelRegistry

__all__ = ["Server", "serve", "start", "checked_base_path", "checked_models", "checked_limits",
           "model_folder", "DEFAULT_MAX_BODY_BYTES"]

_DEFAULTS = {option.flag.replace("-", "_"): option.default for option in SERVE_OPTIONS}
DEFAULT_MAX_BODY_BYTES: int = _DEFAULTS["max_body_bytes"]


class Server:
    """A running server (HTTP in a background thread, plus the version poll).

    Attributes:
        host: the address it is bound to.
        port: the bound port (the real one when started with ``port=0``).
        url: ``http://host:port``.
    """

    def __init__(self, http: HttpServer, registry: ModelRegistry,
                 grpc: GrpcServer | None = None, metrics: Metrics | None = None,
                 batcher: Batcher | None = None) -> None:
        self._http = http
        self.batcher = batcher  # server-side batching (:mod:`.batching`), when enabled
        self.registry = registry
        self.grpc = grpc  # the gRPC server (``grpc.port``, ``grpc.address``), when started
        self.metrics = metrics
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
        if self.grpc is not None:
            self.grpc.stop()
        self.registry.stop()
        if self.batcher is not None:
            self.batcher.stop()
        self._http.server_close()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()


def serve(base_path: str | Path | None = None, host: str = _DEFAULTS["host"], port: int = 0, *,
          model_config_file: str | Path | None = None, model_name: str = "default",
          model_base_path: str | Path | None = None,
          poll_seconds: float = _DEFAULTS["poll_seconds"],
          max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
          threads: int = _DEFAULTS["threads"],
          request_timeout_seconds: float = _DEFAULTS["request_timeout_seconds"],
          idle_timeout_seconds: float = _DEFAULTS["idle_timeout_seconds"],
          max_connections: int = _DEFAULTS["max_connections"], grpc_port: int | None = None,
          metrics_path: str | None = METRICS_PATH,
          batching: BatchingParameters | None = None) -> Server:
    """Load the models under ``base_path`` and serve them over HTTP from a background thread.

    Args:
        base_path: the push base path: ``<base_path>/<model_name>/<integer version>/``; a
            local directory, or ``gs://``/``s3://`` (served from a local copy of each
            model's newest version, copied again as new versions are pushed).
        model_config_file: instead of ``base_path``: TF Serving's ``ModelServerConfig`` text
            file (several models, version policies, version labels; see :mod:`.config`).
        model_name: the name ``model_base_path`` is served under.
        model_base_path: instead of ``base_path``: one model's directory (``<version>/``
            directories), as ``tensorflow_model_server --model_base_path``.
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
        grpc_port: serve TF Serving's gRPC API too, on this port of ``host`` (0: a free one;
            None: no gRPC); ``Server.grpc.port`` is the bound port.
        metrics_path: the HTTP path of the Prometheus metrics page (None: no page; requests
            are counted all the same).
        batching: merge concurrent requests into batches with these parameters (TF Serving's
            ``--enable_batching``; ``BatchingParameters()`` for its defaults; see
            :mod:`.batching`); None: every request is its own call.

    Returns:
        The running :class:`Server`; call ``shutdown()`` (or use it as a context manager).

    Raises:
        NotADirectoryError: ``base_path`` is not a directory.
        StorageError: ``base_path`` is in a bucket that cannot be read (the message says why).
        ValueError: an option is out of range, or ``base_path`` is not a valid URI.
        OSError: the address cannot be bound (the message names it).
    """
    base = checked_models(base_path, model_name=model_name, model_base_path=model_base_path,
                          model_config_file=model_config_file)
    limits = checked_limits(poll_seconds, max_body_bytes, threads, request_timeout_seconds,
                            idle_timeout_seconds, max_connections)
    listener = listen(host, port)  # bound before TensorFlow is imported or a model loaded
    try:
        return start(listener, base, limits, poll_seconds, grpc_port=grpc_port,
                     metrics_path=metrics_path, batching=batching)
    except BaseException:
        listener.close()
        raise


def checked_models(base_path: str | Path | None = None, *, model_name: str = "default",
                   model_base_path: str | Path | None = None,
                   model_config_file: str | Path | None = None) -> Path | Mirror | list:
    """What to serve: exactly one of ``base_path`` (:func:`checked_base_path`),
    ``model_base_path`` (one model, named ``model_name``) or ``model_config_file`` (the
    models it lists); a list of :class:`.config.ModelConfig` for the last two. ValueError
    when none or several are given or the config file is invalid; NotADirectoryError for a
    missing directory."""
    from estflow.components.serve.config import ModelConfig
    from estflow.components.serve.config import read_config_file

    given = [flag for flag, value in (("BASE_PATH", base_path),
                                      ("--model_base_path", model_base_path),
                                      ("--model_config_file", model_config_file)) if value]
    if len(given) != 1:
        raise ValueError("give one of BASE_PATH, --model_base_path (with --model_name) or "
                         f"--model_config_file; got {' and '.join(given) or 'none'}")
    if model_config_file:
        configs = read_config_file(model_config_file)
    elif model_base_path:
        configs = [ModelConfig(model_name, Path(model_base_path).resolve())]
    else:
        base = checked_base_path(base_path)
        if isinstance(base, Mirror) or not model_folder(base):
            return base
        if not MODEL_NAME_PATTERN.fullmatch(base.name):
            raise ValueError(f"{str(base_path)!r} is one model's folder (its version "
                             "directories hold saved_model.pb), not a base path of models, "
                             f"and {base.name!r} is no model name: give its parent "
                             f"({str(base.parent)!r}), or --model-base-path {base_path} "
                             "--model-name NAME")
        configs = [ModelConfig(base.name, base)]
    for config in configs:
        if not config.base_path.is_dir():
            raise NotADirectoryError(f"the base path of model {config.name!r}, "
                                     f"{str(config.base_path)!r}, is not a directory")
    return configs


def model_folder(path: Path) -> dict[int, Path]:
    """The version directories of ``path`` when it is one model's folder (``<model_name>/``:
    integer version directories holding ``saved_model.pb``) rather than a base path of
    models ({} otherwise): ``estflow serve serving_models/taxi`` for ``serving_models``."""
    return {version: folder for version, folder in version_dirs(path).items()
            if (folder / "saved_model.pb").is_file()}


def checked_base_path(base_path: str | Path) -> Path | Mirror:
    """``base_path``, resolved; NotADirectoryError when it is not a directory. A ``gs://`` or
    ``s3://`` base is a :class:`Mirror` (ValueError for a URI without a bucket)."""
    if "://" in str(base_path):
        return Mirror(str(base_path))
    base = Path(base_path).resolve()
    if not base.is_dir():
        raise NotADirectoryError(f"the model base path {str(base)!r} is not a directory")
    return base


def checked_limits(poll_seconds: float, max_body_bytes: int, threads: int,
                   request_timeout_seconds: float, idle_timeout_seconds: float,
                   max_connections: int) -> Limits:
    """The server's limits; ValueError (naming the option) for a value out of range."""
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


def start(listener: socket.socket, base: Path | Mirror, limits: Limits,
          poll_seconds: float, *, grpc_port: int | None = None,
          metrics_path: str | None = METRICS_PATH,
          batching: BatchingParameters | None = None) -> Server:
    """Load the models (this imports TensorFlow) and start serving on ``listener`` (and gRPC
    on ``grpc_port`` of the same host, unless None); a :class:`Mirror` is copied first (a
    bucket that cannot be read fails here: StorageError) and again before each poll's scan.
    With ``batching``, every loaded version's signatures go through one :class:`.Batcher`, so
    REST and gRPC requests are batched together."""
    from estflow.components.serve.batching import Batcher

    batcher = Batcher(batching) if batching is not None else None
    try:
        return _start(listener, base, limits, poll_seconds, grpc_port, metrics_path, batcher)
    except BaseException:
        if batcher is not None:
            batcher.stop()
        raise


def _start(listener: socket.socket, base: Path | Mirror | list, limits: Limits,
           poll_seconds: float, grpc_port: int | None, metrics_path: str | None,
           batcher: Batcher | None) -> Server:
    from estflow.components.serve.grpc_server import start_grpc
    from estflow.components.serve.metrics import Metrics
    from estflow.components.serve.metrics import metered_app
    from estflow.components.serve.models import load_model
    from estflow.components.serve.registry import ModelRegistry
    from estflow.components.serve.rest import make_app
    from estflow.components.serve.rest import parse_route

    metrics = Metrics()

    def load_and_count(name: str, version: int, version_dir: Path):
        model = load_model(name, version, version_dir)
        metrics.warmed(name, version, getattr(model, "warmup_replayed", 0))
        return model

    loader = batcher.loader(load_and_count) if batcher is not None else load_and_count
    if isinstance(base, list):  # the models of a config (.config.ModelConfig)
        registry = ModelRegistry(configs=base, loader=loader)
    elif isinstance(base, Mirror):
        base.sync()
        registry = ModelRegistry(base.local, sync=base.sync, source=base.uri, loader=loader)
    else:
        registry = ModelRegistry(base, loader=loader)
    registry.refresh()
    grpc = None
    if grpc_port is not None:
        grpc = start_grpc(registry, listener.getsockname()[0], grpc_port,
                          threads=limits.threads, max_message_bytes=limits.max_body_bytes,
                          metrics=metrics)
    if poll_seconds:
        registry.start_polling(poll_seconds)
    app = metered_app(make_app(registry), metrics, metrics_path, parse_route)
    return Server(HttpServer(listener, app, limits), registry, grpc, metrics, batcher)

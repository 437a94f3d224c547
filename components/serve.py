"""The serve step: a local server speaking TF Serving's REST API for the models push published.

``python -m estflow.components.serve BASE_PATH [--port 8501] [--host 127.0.0.1]
[--poll-seconds 2] [--max-body-bytes 10485760]``

Every subdirectory of BASE_PATH holding integer version directories is a model (push's layout,
``<base>/<model_name>/<version>/``). The highest version of each is loaded at start and served;
a background poll loads newer versions as they are pushed and swaps them in without a restart
(a version that fails to load is logged and the previous one keeps serving). Only the served
(latest) version answers ``/versions/N``; other versions are 404, as with TF Serving's default
version policy.

The API is TF Serving's (see :mod:`estflow.components._serve.http` for the routes and
:mod:`estflow.components._serve.codec` for the JSON mapping), so the same client code works
against TF Serving or a KServe InferenceService whose ``storageUri`` is the model base path::

    GET  /v1/models/taxi                   {"model_version_status": [{"version": "2", ...}]}
    GET  /v1/models/taxi/metadata          {"model_spec": ..., "metadata": {"signature_def": ...}}
    POST /v1/models/taxi:predict           {"instances": [{"b64": "<serialized tf.Example>"}]}
    POST /v1/models/taxi:classify          {"examples": [{"fare": 7.25, "payment_type": "Cash"}]}

Example:
    >>> server = serve("/models")                         # doctest: +SKIP
    >>> urllib.request.urlopen(server.url + "/v1/models/taxi").read()   # doctest: +SKIP
    >>> server.shutdown()                                 # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path

from estflow.components._serve.http import RestServer
from estflow.components._serve.models import ModelRegistry
from estflow.components._serve.models import ServedModel

__all__ = ["Server", "serve", "main", "DEFAULT_MAX_BODY_BYTES"]

DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024

log = logging.getLogger("estflow.serve")


class Server:
    """A running server (HTTP in a background thread, plus the version poll).

    Attributes:
        host: the address it is bound to.
        port: the bound port (the real one when started with ``port=0``).
        url: ``http://host:port``.
    """

    def __init__(self, http: RestServer, registry: ModelRegistry) -> None:
        self._http = http
        self.registry = registry
        self.host, self.port = http.server_address[:2]
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{host}:{self.port}"
        self._thread = threading.Thread(target=http.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="estflow-serve-http", daemon=True)
        self._thread.start()

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


def serve(base_path: str | Path, host: str = "127.0.0.1", port: int = 0, *,
          poll_seconds: float = 2.0, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> Server:
    """Load the models under ``base_path`` and serve them over HTTP from a background thread.

    Args:
        base_path: the push base path: ``<base_path>/<model_name>/<integer version>/``.
        host: address to bind; loopback by default (nothing here authenticates requests).
        port: TCP port; 0 picks a free one (see ``Server.port``).
        poll_seconds: how often to look for newly pushed versions; 0 disables polling.
        max_body_bytes: larger request bodies are refused with 413 without being read.

    Returns:
        The running :class:`Server`; call ``shutdown()`` (or use it as a context manager).

    Raises:
        NotADirectoryError: ``base_path`` is not a directory.
        ValueError: ``poll_seconds`` or ``max_body_bytes`` is out of range.
        OSError: the address cannot be bound.
    """
    base = Path(base_path).resolve()
    if not base.is_dir():
        raise NotADirectoryError(f"the model base path {str(base)!r} is not a directory")
    if poll_seconds < 0:
        raise ValueError(f"Received an invalid value for `poll_seconds`, expected >= 0 (0: no "
                         f"polling). Received: poll_seconds={poll_seconds}")
    if max_body_bytes <= 0:
        raise ValueError("Received an invalid value for `max_body_bytes`, expected a positive "
                         f"integer. Received: max_body_bytes={max_body_bytes}")
    registry = ModelRegistry(base)
    http = RestServer((host, port), registry, max_body_bytes)  # bind first: fail fast
    try:
        registry.refresh()
    except BaseException:
        http.server_close()
        raise
    if poll_seconds:
        registry.start_polling(poll_seconds)
    return Server(http, registry)


def _wait_for_stop() -> None:
    """Block until Ctrl-C or SIGTERM."""
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="estflow.components.serve",
                                     description="Serve pushed models over TF Serving's REST API.")
    parser.add_argument("base_path", metavar="BASE_PATH",
                        help="push base path: BASE_PATH/<model_name>/<integer version>/")
    parser.add_argument("--port", type=int, default=8501, help="TCP port (default 8501; 0: any)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    parser.add_argument("--poll-seconds", type=float, default=2.0,
                        help="seconds between looks for new versions (default 2; 0: never)")
    parser.add_argument("--max-body-bytes", type=int, default=DEFAULT_MAX_BODY_BYTES,
                        help=f"largest request body accepted (default {DEFAULT_MAX_BODY_BYTES})")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="[serve] %(asctime)s %(levelname)s %(message)s")
    try:
        server = serve(args.base_path, args.host, args.port, poll_seconds=args.poll_seconds,
                       max_body_bytes=args.max_body_bytes)
    except (OSError, ValueError) as e:
        print(f"estflow serve: {e}", file=sys.stderr, flush=True)
        return 2
    models = ", ".join(f"{m.name}@{m.version}" for m in server.models()) or "none"
    print(f"estflow serve: listening on {server.url} (models: {models})", flush=True)
    try:
        _wait_for_stop()
    finally:
        server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

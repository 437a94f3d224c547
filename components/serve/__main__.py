"""The serve step: a local server speaking TF Serving's REST API for the models push published.

``python -m estflow.components.serve BASE_PATH [--port 8501] [--host 127.0.0.1]
[--poll-seconds 2] [--max-body-bytes 10485760] [--threads 16] [--request-timeout-seconds 30]
[--idle-timeout-seconds 60] [--max-connections 256] [--grpc-port 8500]
[--monitoring-config-file FILE] [--enable-batching [--batching-parameters-file FILE]]``
(the options are
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
import os
import sys

from estflow.components.serve import step
from estflow.components.serve.server import DEFAULT_MAX_BODY_BYTES
from estflow.components.serve.server import Server
from estflow.components.serve.server import serve
from estflow.dsl.contracts import SERVE_OPTIONS
from estflow.dsl.contracts import add_options

__all__ = ["Server", "serve", "main", "DEFAULT_MAX_BODY_BYTES"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="estflow.components.serve",
                                     description="Serve pushed models over TF Serving's REST API.")
    parser.add_argument("base_path", metavar="BASE_PATH", nargs="?",
                        help="push base path: BASE_PATH/<model_name>/<integer version>/ (one "
                        "model's folder, BASE_PATH/<integer version>/, is served as that "
                        "model; or --model_base_path or --model_config_file instead)")
    add_options(parser, SERVE_OPTIONS)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the server with command-line arguments until it is stopped; returns the exit
    status."""
    args = _parser().parse_args(argv)
    return step.run(args.base_path, args.host, args.port, poll_seconds=args.poll_seconds,
                    max_body_bytes=args.max_body_bytes, threads=args.threads,
                    model_config_file=args.model_config_file, model_name=args.model_name,
                    model_base_path=args.model_base_path,
                    request_timeout_seconds=(args.rest_api_timeout_in_ms / 1000
                                             if args.rest_api_timeout_in_ms
                                             else args.request_timeout_seconds),
                    idle_timeout_seconds=args.idle_timeout_seconds,
                    max_connections=args.max_connections, grpc_port=args.grpc_port,
                    monitoring_config_file=args.monitoring_config_file,
                    enable_batching=bool(args.enable_batching),
                    batching_parameters_file=args.batching_parameters_file)


if __name__ == "__main__":
    status = main()
    # Every thread is stopped and every socket closed when main returns: leave without
    # TensorFlow's interpreter teardown, which takes seconds after the "stopped" line.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)

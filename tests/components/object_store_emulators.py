"""Real object store emulators on 127.0.0.1, started and stopped by the test (or script) that
uses them, yielding the environment variables a step needs to reach them, as a user's pod
would set them (no real bucket is reachable here):

* :func:`moto_s3`: moto's S3 server (``moto.server.ThreadedMotoServer``), the S3 API with
  path-style addressing as a MinIO endpoint has it; ``AWS_ENDPOINT_URL_S3`` (or, with
  ``style="kfp"``, ``S3_ENDPOINT`` host:port with ``S3_USE_HTTPS=0`` as KFP's MinIO setups
  give it) and test credentials.
* :func:`gcs_emulator`: ``gcp-storage-emulator`` (the Cloud Storage JSON API, in memory);
  ``STORAGE_EMULATOR_HOST``, which google-cloud-storage honours without credentials.

Reusable outside pytest (an image check)::

    with moto_s3(["models"]) as env:
        subprocess.run([...], env={**os.environ, **env}, check=True)
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable
from collections.abc import Iterator

__all__ = ["moto_s3", "gcs_emulator", "patched_env"]


@contextlib.contextmanager
def moto_s3(buckets: Iterable[str] = (), *, style: str = "aws") -> Iterator[dict[str, str]]:
    """moto's S3 server on 127.0.0.1 (a free port) with ``buckets`` created; yields the
    environment that points boto3 (and estflow) at it."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        env = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
               "AWS_REGION": "us-east-1"}
        if style == "kfp":
            env.update({"S3_ENDPOINT": f"{host}:{port}", "S3_USE_HTTPS": "0",
                        "S3_VERIFY_SSL": "0"})
        else:
            env["AWS_ENDPOINT_URL_S3"] = f"http://{host}:{port}"
        import boto3

        client = boto3.client("s3", endpoint_url=f"http://{host}:{port}",
                              region_name="us-east-1", aws_access_key_id="test",
                              aws_secret_access_key="test")
        existing = {b["Name"] for b in client.list_buckets()["Buckets"]}  # moto keeps them
        for bucket in buckets:
            if bucket not in existing:
                client.create_bucket(Bucket=bucket)
        yield env
    finally:
        server.stop()


@contextlib.contextmanager
def gcs_emulator(buckets: Iterable[str] = ()) -> Iterator[dict[str, str]]:
    """gcp-storage-emulator on 127.0.0.1 (a free port, in memory) with ``buckets`` created;
    yields ``{"STORAGE_EMULATOR_HOST": "http://127.0.0.1:PORT"}``."""
    from gcp_storage_emulator.handlers import buckets as bucket_handlers
    from gcp_storage_emulator.server import create_server

    logging.getLogger("gcp_storage_emulator").setLevel(logging.WARNING)
    server = create_server("127.0.0.1", 0, in_memory=True)
    server.start()
    try:
        port = server._api._httpd.server_address[1]  # the emulator picks no port of its own
        for bucket in buckets:
            bucket_handlers.create_bucket(bucket, server._storage)
        yield {"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{port}",
               "GOOGLE_CLOUD_PROJECT": "test"}
    finally:
        server.stop()


@contextlib.contextmanager
def patched_env(env: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``env`` set inside the block, restored after."""
    before = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

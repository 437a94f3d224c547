"""Small object stores on 127.0.0.1 for the push guard's tests, started and stopped by the
test that uses them (no real bucket is reachable here):

* :class:`FakeGcs`: the few Cloud Storage JSON API calls google-cloud-storage makes to create
  an object only if absent (a multipart upload with ``ifGenerationMatch=0``: 412 when it
  exists) and to read one (``alt=media``: 404 when absent). Requests are served one at a time,
  so a conditional create is atomic, as Cloud Storage's is.
* :class:`MotoS3`: moto's S3 implementation (a real S3 API, honouring ``If-None-Match: *``),
  served one request at a time for the same reason (moto checks, then writes).
"""

from __future__ import annotations

import email
import http.server
import json
import threading
import urllib.parse


class _GcsHandler(http.server.BaseHTTPRequestHandler):
    objects: dict[tuple[str, str], bytes]

    def log_message(self, *args):  # quiet
        pass

    def _reply(self, status: int, body: bytes, content_type: str = "application/json"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str):
        self._reply(status, json.dumps({"error": {"code": status, "message": message}}).encode())

    def do_POST(self):  # noqa: N802 - http.server's name
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        parts = url.path.split("/")  # /upload/storage/v1/b/BUCKET/o
        if parts[1:4] != ["upload", "storage", "v1"] or query.get("uploadType") != ["multipart"]:
            return self._error(501, f"not implemented in this fake: POST {self.path}")
        body = self.rfile.read(int(self.headers["Content-Length"]))
        message = email.message_from_bytes(
            f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode() + body)
        metadata, data = message.get_payload()
        name = json.loads(metadata.get_payload())["name"]
        key = (parts[5], name)
        if query.get("ifGenerationMatch") == ["0"] and key in self.objects:
            return self._error(412, "conditionNotMet")
        self.objects[key] = data.get_payload(decode=True)
        self._reply(200, json.dumps({"bucket": parts[5], "name": name, "generation": "1",
                                     "size": str(len(self.objects[key]))}).encode())

    def do_GET(self):  # noqa: N802 - http.server's name
        url = urllib.parse.urlsplit(self.path)
        parts = url.path.split("/")  # /download/storage/v1/b/BUCKET/o/NAME?alt=media
        if "alt=media" not in url.query or len(parts) < 8:
            return self._error(501, f"not implemented in this fake: GET {self.path}")
        key = (parts[5], urllib.parse.unquote("/".join(parts[7:])))
        if key not in self.objects:
            return self._error(404, "No such object")
        self._reply(200, self.objects[key], "application/octet-stream")


class FakeGcs:
    """``with FakeGcs() as gcs:``: ``gcs.endpoint``, ``gcs.objects`` {(bucket, name): bytes}."""

    def __enter__(self) -> FakeGcs:
        self.objects = {}
        handler = type("Handler", (_GcsHandler,), {"objects": self.objects})
        self._server = http.server.HTTPServer(("127.0.0.1", 0), handler)  # one at a time
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def gcs_client(endpoint: str):
    """A google-cloud-storage client for the fake (no credentials)."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    return storage.Client(project="test", credentials=AnonymousCredentials(),
                          client_options={"api_endpoint": endpoint})


class MotoS3:
    """``with MotoS3() as s3:``: ``s3.endpoint``; moto's S3 on 127.0.0.1, one request at a
    time."""

    def __enter__(self) -> MotoS3:
        from moto.moto_server.threaded_moto_server import MotoRequestHandler
        from moto.server import DomainDispatcherApplication
        from moto.server import create_backend_app
        from werkzeug.serving import make_server

        class Quiet(MotoRequestHandler):
            def log_request(self, *args):
                pass

        app = DomainDispatcherApplication(create_backend_app)
        self._server = make_server("127.0.0.1", 0, app, threaded=False, request_handler=Quiet)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def s3_client(endpoint: str):
    """A boto3 S3 client for the fake (test credentials)."""
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id="test", aws_secret_access_key="test")

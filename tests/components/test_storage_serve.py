"""``estflow serve`` of a model base in a bucket (``s3://``, ``gs://``), as a user runs it: the
newest version of each model is copied to the user's cache directory and served from there,
a version pushed to the bucket later is copied and served by the poll, and a bucket that
cannot be read is a clear error at start.

The stores are real emulators on 127.0.0.1 that each test starts and stops
(tests/components/object_store_emulators.py): moto's S3 server (KFP's ``S3_ENDPOINT``) and
gcp-storage-emulator (``STORAGE_EMULATOR_HOST``). The server runs as ``estflow serve`` in a
subprocess with only those variables set, in the default environment (its cache under
``~/.cache``, removed by the test).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from estflow.components._io import model_repo
from estflow.components._io import storage
from estflow.components.push import publish
from estflow.components.serve.mirror import cache_dir
from tests.components.test_storage_warm_start import bucket_store

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def versions(tmp_path_factory):
    """Two versions of the serving tests' model, on disk (pushed by each test)."""
    from tests.components import _serving_fixtures as fx  # imports TensorFlow: only here

    base = tmp_path_factory.mktemp("versions") / "taxi"
    fx.write_versions(base, (1, 2))
    return base


@pytest.fixture(params=["s3-kfp", "gs"])
def store(request, monkeypatch):
    yield from bucket_store(request.param, monkeypatch)


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "TF_CPP"))}


def _served_version(url: str) -> str | None:
    from tests.components import _serving_fixtures as fx

    host, port = url.removeprefix("http://").split(":")
    status, payload = fx.http_request(host, int(port), "GET", "/v1/models/taxi")
    return payload["model_version_status"][0]["version"] if status == 200 else None


def test_estflow_serve_serves_a_bucket_and_picks_up_a_new_push(versions, store, tmp_path):
    base = f"{store}/models"
    destination = model_repo.destination_for(base, "taxi")
    publish.push_to(destination, versions / "1", version=1)
    cache = cache_dir(base)
    assert str(cache).startswith(os.path.expanduser("~/.cache/estflow/serve/"))
    process = subprocess.Popen(
        [sys.executable, "-m", "estflow.pipelines", "serve", base, "--port", "0",
         "--poll-seconds", "0.5"], cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=_env())
    try:
        line = process.stdout.readline()
        match = re.fullmatch(r"estflow serve: listening on (http://127\.0\.0\.1:\d+) "
                             r"\(models: taxi@1\)\n", line)
        assert match, line + process.stderr.read() if not line else line
        url = match.group(1)
        assert _served_version(url) == "1"
        assert sorted(p.name for p in (cache / "taxi").iterdir()) == ["1"]

        publish.push_to(destination, versions / "2", version=2)
        deadline = time.monotonic() + 120  # a bound on waiting, not a timing assertion
        while _served_version(url) != "2" and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _served_version(url) == "2"
        assert sorted(p.name for p in (cache / "taxi").iterdir()) == ["2"]
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=60)
        shutil.rmtree(cache, ignore_errors=True)
    assert process.returncode == 0, stderr[-3000:]
    assert f"copied model taxi version 2 from {base}" in stderr


def test_a_bucket_that_cannot_be_read_is_a_clear_error_at_start(store, tmp_path):
    def serve(base: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "estflow.pipelines", "serve", base,
                               "--port", "0"], cwd=tmp_path, capture_output=True, text=True,
                              env=_env(), timeout=300)

    missing = store.replace("://models/", "://no-such-bucket/")
    done = serve(missing)
    assert done.returncode == 2
    assert f"estflow serve: cannot list {missing}: no bucket 'no-such-bucket'" in done.stderr
    scheme = store.partition("://")[0]
    done = serve(f"{scheme}://")
    assert done.returncode == 2
    assert ("Received an invalid value for the model base path, expected gs://BUCKET/PATH or "
            f"s3://BUCKET/PATH. Received: '{scheme}://'") in done.stderr, done.stderr
    assert storage.list_dir(store) == []  # nothing written to the bucket

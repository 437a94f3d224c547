"""Batch prediction with a model pushed to a bucket and predictions written to one
(``estflow predict s3://.../taxi --output s3://.../scores``), as a user runs it: TensorFlow has
no ``gs://``/``s3://`` filesystem without tensorflow-io, so the model is downloaded by estflow's
storage module; the predictions are written by Beam's filesystems, pointed at the endpoint the
environment names (KFP's ``S3_ENDPOINT`` included, which Beam does not read itself).

The stores are real emulators on 127.0.0.1 that each test starts and stops
(tests/components/object_store_emulators.py): moto's S3 server (``AWS_ENDPOINT_URL_S3``, or
KFP's ``S3_ENDPOINT``) and gcp-storage-emulator (``STORAGE_EMULATOR_HOST``). The command runs
in a subprocess from a fresh directory with only those variables set, as in a pod.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from estflow.components._io import storage
from estflow.dsl.contracts import Files
from tests.components.test_storage_warm_start import bucket_store

pytestmark = pytest.mark.slow

ROWS = "trip_id,fare,trip_seconds,payment_type\nt1,1.5,3,Cash\nt2,oops,1,Cash\n" + "".join(
    f"t{i},{i}.5,{i},Card\n" for i in range(3, 120))


@pytest.fixture(scope="module")
def versions(tmp_path_factory):
    """Two pushed versions of the serving tests' model, on disk (uploaded by each test)."""
    from tests.components import _serving_fixtures as fx  # imports TensorFlow: only here

    base = tmp_path_factory.mktemp("versions") / "taxi"
    fx.write_versions(base, (1, 2))
    return base


@pytest.fixture(params=["s3", "s3-kfp", "gs"])
def store(request, monkeypatch):
    yield from bucket_store(request.param, monkeypatch)


def _estflow(cwd, *args: str) -> subprocess.CompletedProcess:
    """``estflow predict ARGS`` in ``cwd``, its temporary files in ``cwd/tmp`` (TMPDIR), which
    must hold no model download after it: each of Beam's worker processes downloads a bucket
    model, and Beam ends them without their exit handlers."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    tmp = Path(cwd) / "tmp"
    tmp.mkdir(exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "estflow.pipelines", "predict", *args],
                          cwd=cwd, env={**env, "TF_CPP_MIN_LOG_LEVEL": "2", "TMPDIR": str(tmp)},
                          capture_output=True, text=True, timeout=600)
    left = sorted(p.name for p in tmp.iterdir() if p.name.startswith("estflow-download"))
    assert not left, f"model downloads left in {tmp}: {left}"
    return done


def test_estflow_predict_scores_with_a_bucket_model_into_a_bucket(versions, store, tmp_path):
    storage.upload_tree(versions, f"{store}/models/taxi")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "to_score.csv").write_text(ROWS)
    done = _estflow(tmp_path, f"{store}/models/taxi", "--input", "data/to_score.csv",
                    "--output", f"{store}/scores", "--keys", "trip_id", "--format", "csv",
                    "--signature", "classify")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "scored 118 rows, rejected 1" in done.stdout
    csv = storage.read_bytes(f"{store}/scores/predictions-00000-of-00001.csv").decode()
    assert csv.splitlines()[0] == "trip_id,classes_0,classes_1,scores_0,scores_1"
    assert len(csv.splitlines()) == 1 + 118
    summary = json.loads(storage.read_bytes(f"{store}/scores/{Files.PREDICT_RESULT}"))
    assert summary["model"]["version"] == 2
    assert summary["model"]["path"] == f"{store}/models/taxi/2"
    assert storage.list_dir(f"{store}/scores") == sorted(
        ["predictions-00000-of-00001.csv", Files.REJECTED, Files.PREDICT_RESULT])

    # one version named, a local output
    done = _estflow(tmp_path, f"{store}/models/taxi/1", "--input", "data/to_score.csv",
                    "--output", "out", "--keys", "trip_id")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "out" / Files.PREDICT_RESULT).read_text())
    assert summary["model"] == {**summary["model"], "version": 1,
                                "path": f"{store}/models/taxi/1"}


def test_a_bucket_without_a_model_is_a_clear_error(store, tmp_path):
    (tmp_path / "rows.csv").write_text(ROWS)
    done = _estflow(tmp_path, f"{store}/models/none", "--input", "rows.csv", "--output", "o")
    assert done.returncode == 1, done.stderr[-3000:]
    assert f"no model at '{store}/models/none'" in done.stderr

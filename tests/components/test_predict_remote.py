"""Batch prediction reading and writing through a Beam filesystem that is not local: an object
store (``objtest://``, a Beam ``FileSystem`` registered here: no directories, no directory
rename, as ``gs://`` and ``s3://``), so the source is read and the output published the way
they are on a bucket: staged under the output, ``predict.json`` removed first and written last.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from apache_beam.io.filesystem import FileMetadata
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.localfilesystem import LocalFileSystem

import estflow.dsl as ef
from estflow.components.predict import __main__ as predict
from estflow.components.predict.sinks import STALE_SECONDS
from estflow.dsl.contracts import Files
from tests.components import _serving_fixtures as fx

_SCHEME = "objtest"
_ROOT: dict[str, Path] = {}


class _ObjectStore(LocalFileSystem):
    """``objtest://a/b`` is the file ``<root>/a/b``; objects only (no directories to make,
    rename or list), as Beam's GCS and S3 filesystems."""

    @classmethod
    def scheme(cls):
        return _SCHEME

    @staticmethod
    def _local(path: str) -> str:
        return str(_ROOT["root"] / path[len(f"{_SCHEME}://"):])

    @staticmethod
    def _url(local: str) -> str:
        return f"{_SCHEME}://" + os.path.relpath(local, _ROOT["root"])

    def join(self, basepath, *paths):
        return "/".join([basepath.rstrip("/"), *(p.strip("/") for p in paths)])

    def split(self, path):
        head, _, tail = path.rstrip("/").rpartition("/")
        return head, tail

    def has_dirs(self):
        return False

    def mkdirs(self, path):
        pass

    def _list(self, dir_or_prefix):
        local = self._local(dir_or_prefix)
        for folder, _dirs, files in os.walk(local if os.path.isdir(local) else
                                            os.path.dirname(local)):
            for name in files:
                path = os.path.join(folder, name)
                if path.startswith(local):
                    yield FileMetadata(self._url(path), os.path.getsize(path),
                                       os.path.getmtime(path))

    def create(self, path, *args, **kwargs):
        os.makedirs(os.path.dirname(self._local(path)), exist_ok=True)
        return super().create(self._local(path), *args, **kwargs)

    def open(self, path, *args, **kwargs):
        return super().open(self._local(path), *args, **kwargs)

    def rename(self, sources, destinations):
        for source, destination in zip(sources, destinations, strict=True):
            assert not os.path.isdir(self._local(source)), "object stores rename no directory"
            os.makedirs(os.path.dirname(self._local(destination)), exist_ok=True)
            os.rename(self._local(source), self._local(destination))

    def exists(self, path):
        return os.path.isfile(self._local(path))

    def size(self, path):
        return os.path.getsize(self._local(path))

    def metadata(self, path):
        local = self._local(path)
        return FileMetadata(path, os.path.getsize(local), os.path.getmtime(local))

    def delete(self, paths):
        for path in paths:
            os.remove(self._local(path))


@pytest.fixture
def store(tmp_path):
    _ROOT["root"] = tmp_path / "bucket"
    (tmp_path / "bucket").mkdir()
    yield tmp_path / "bucket"
    _ROOT.pop("root")


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_source_and_output_on_an_object_store(store, tmp_path):
    fx.write_versions(tmp_path / "models" / "taxi", (1,))
    (store / "in").mkdir()
    for part in range(2):
        (store / "in" / f"part{part}.csv").write_text(
            "trip_id,fare,trip_seconds,payment_type\n"
            + "".join(f"p{part}r{i},{i}.5,{i},Cash\n" for i in range(50)) + "bad,x,1,Cash\n")
    (store / "scores").mkdir()
    (store / "scores" / "predictions-00000-of-00003.jsonl").write_text("old\n")
    (store / "scores" / Files.PREDICT_RESULT).write_text("{}")
    pipeline = ef.Pipeline(name="scoring", predict=ef.BatchPredict(
        model=str(tmp_path / "models" / "taxi"),
        source=ef.CsvSource(f"{_SCHEME}://in/*.csv", max_rejected_fraction=0.1),
        output=f"{_SCHEME}://scores", keys=("trip_id",)))

    summary = predict.run(pipeline, str(tmp_path / "artifact"))

    assert _files(store / "scores") == [Files.PREDICT_RESULT, "predictions-00000-of-00001.jsonl",
                                        Files.REJECTED]
    lines = (store / "scores" / "predictions-00000-of-00001.jsonl").read_text().splitlines()
    assert len(lines) == summary["scored"] == 100 and summary["rejected"] == 2
    assert sorted(summary["files"]) == [f"{_SCHEME}://in/part0.csv", f"{_SCHEME}://in/part1.csv"]
    assert json.loads((store / "scores" / Files.PREDICT_RESULT).read_text())["output_files"] == [
        f"{_SCHEME}://scores/predictions-00000-of-00001.jsonl"]
    assert json.loads((tmp_path / "artifact" / Files.PREDICT_RESULT).read_text())["scored"] == 100


def test_an_interrupted_publish_leaves_no_predict_json(store, tmp_path, monkeypatch):
    fx.write_versions(tmp_path / "models" / "taxi", (1,))
    (store / "in.csv").write_text("fare,trip_seconds,payment_type\n1.5,3,Cash\n")
    pipeline = ef.Pipeline(name="scoring", predict=ef.BatchPredict(
        model=str(tmp_path / "models" / "taxi"), source=ef.CsvSource(f"{_SCHEME}://in.csv"),
        output=f"{_SCHEME}://scores"))
    predict.run(pipeline, str(tmp_path / "a"))
    assert (store / "scores" / Files.PREDICT_RESULT).is_file()

    renames = FileSystems.rename

    def fail_on_the_predictions(sources, destinations):
        if any("predictions-" in d for d in destinations):
            raise OSError("the network went away")
        return renames(sources, destinations)

    monkeypatch.setattr(FileSystems, "rename", fail_on_the_predictions)
    with pytest.raises(OSError, match="network"):
        predict.run(pipeline, str(tmp_path / "b"))
    assert Files.PREDICT_RESULT not in _files(store / "scores")  # not a finished output
    staged = [f for f in _files(store / "scores") if f.startswith(".tmp-predict-")]
    assert staged  # what the interrupted publish left, hidden

    monkeypatch.undo()
    old = time.time() - STALE_SECONDS - 60
    for name in staged:
        os.utime(store / "scores" / name, (old, old))
    predict.run(pipeline, str(tmp_path / "c"))  # removes them, then publishes
    assert _files(store / "scores") == [Files.PREDICT_RESULT, "predictions-00000-of-00001.jsonl",
                                        Files.REJECTED]

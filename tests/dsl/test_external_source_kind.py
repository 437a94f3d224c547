"""A source kind declared outside estflow round-trips through a spec read by a process that
never imported it: written as ``"module:ClassName"`` (plus ``"kind_file"`` when declared in a
pipeline file loaded from its path), read back by importing that module; anything else is
refused with a clear error. estflow's own kinds are written as before (their bare name)."""

from __future__ import annotations

import json
import sys

import pytest

import estflow.dsl as ef
from estflow.dsl import serialization
from estflow.dsl import sources

KIND = '''
import dataclasses

from estflow.dsl.sources import Source


@dataclasses.dataclass(frozen=True)
class JsonLinesSource(Source):
    path: str
    max_rejected_fraction: float = 0.01


@dataclasses.dataclass(frozen=True)
class CsvSource(Source):  # estflow's name, in another module: another kind
    path: str


NOT_A_KIND = 3
'''


OURS = ("ext_kinds", "estflow_user_pipeline", "estflow_user_gone", "no_such_kinds_module")


@pytest.fixture(autouse=True)
def _registries(monkeypatch):
    """The kinds and modules this test declares are forgotten after it (only those)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield
    for module in OURS:
        sys.modules.pop(module, None)
    ours = [k for k in serialization._REGISTRY if k.split(":")[0] in OURS]
    for kind in ours:
        del serialization._REGISTRY[kind]
        serialization._IMPORTABLE.discard(kind)
        sources._KINDS.pop(kind, None)
    for cls in [c for c, (kind, _) in serialization._WRITTEN.items()
                if kind.split(":")[0] in OURS]:
        del serialization._WRITTEN[cls]


def _forget(module: str) -> None:
    """As in a fresh process: the module was never imported, its kinds never declared."""
    del sys.modules[module]
    for kind in [k for k in serialization._REGISTRY if k.startswith(f"{module}:")]:
        del serialization._REGISTRY[kind]


def _pipeline(source) -> ef.Pipeline:
    return ef.Pipeline(name="p", source=source, features=(ef.Numeric("x"),),
                       label=ef.Label("y"), model=ef.LinearClassifier(feature_columns=("x",)),
                       train=ef.TrainSpec(max_steps=1))


def _error(data: dict) -> ef.DslError:
    with pytest.raises(ef.DslError) as info:
        serialization.from_dict(data)
    return info.value


def test_estflow_kinds_are_written_as_before():
    data = serialization.to_dict(ef.CsvSource("a.csv"))
    assert data["kind"] == "CsvSource" and serialization.FILE_KEY not in data


def test_a_kind_in_a_module_is_read_back_by_importing_the_module(tmp_path):
    (tmp_path / "ext_kinds.py").write_text(KIND)
    sys.path.insert(0, str(tmp_path))
    import ext_kinds  # noqa: PLC0415 - the user's module, written above

    text = _pipeline(ext_kinds.JsonLinesSource("d.jsonl", 0.5)).to_json()
    assert json.loads(text)["source"] == {"kind": "ext_kinds:JsonLinesSource",
                                          "max_rejected_fraction": 0.5, "path": "d.jsonl"}
    _forget("ext_kinds")

    again = ef.Pipeline.from_json(text)

    assert sys.modules["ext_kinds"] is not ext_kinds  # imported again, by its name
    assert type(again.source) is sys.modules["ext_kinds"].JsonLinesSource
    assert again.source.path == "d.jsonl" and again.source.max_rejected_fraction == 0.5
    assert again.to_json() == text


def test_a_kind_named_as_an_estflow_kind_is_another_kind(tmp_path):
    (tmp_path / "ext_kinds.py").write_text(KIND)
    sys.path.insert(0, str(tmp_path))
    import ext_kinds  # noqa: PLC0415

    assert {ef.CsvSource, ext_kinds.CsvSource} <= set(sources.source_kinds())
    assert serialization.to_dict(ext_kinds.CsvSource("a"))["kind"] == "ext_kinds:CsvSource"
    assert type(serialization.from_json(serialization.to_json(ef.CsvSource("a.csv")))) \
        is ef.CsvSource


def test_a_kind_in_a_pipeline_file_is_read_back_by_running_the_file(tmp_path):
    file = tmp_path / "pipeline.py"
    file.write_text(KIND + "\npipeline = 1\n")
    module = serialization._load_file("estflow_user_pipeline", str(file))  # as estflow run

    data = serialization.to_dict(module.JsonLinesSource("d.jsonl"))
    assert data["kind"] == "estflow_user_pipeline:JsonLinesSource"
    assert data[serialization.FILE_KEY] == str(file)
    _forget("estflow_user_pipeline")

    again = serialization.from_dict(data)

    assert type(again).__module__ == "estflow_user_pipeline" and again.path == "d.jsonl"
    assert serialization.to_dict(again) == data


def test_a_module_that_does_not_import_is_named_with_what_to_do():
    err = _error({"kind": "no_such_kinds_module:JsonLinesSource", "path": "d.jsonl"})
    assert err.path == "kind" and err.received == "no_such_kinds_module:JsonLinesSource"
    assert "cannot import module 'no_such_kinds_module'" in str(err)
    assert "installed" in str(err) and "PYTHONPATH" in str(err)
    assert "pipeline file itself" in str(err)


def test_a_pipeline_file_that_is_not_here_is_named(tmp_path):
    err = _error({"kind": "estflow_user_gone:JsonLinesSource", "path": "d.jsonl",
                  serialization.FILE_KEY: str(tmp_path / "gone.py")})
    assert "gone.py" in str(err) and "is not here" in str(err)


@pytest.mark.parametrize("kind", ["os:system", "json:JSONDecoder", "ext_kinds:NOT_A_KIND",
                                  "ext_kinds:Missing", "estflow.dsl.sources:SchemaCheck",
                                  "estflow.dsl.sources:Source"])
def test_what_is_not_a_source_kind_is_refused(tmp_path, kind):
    (tmp_path / "ext_kinds.py").write_text(KIND)
    sys.path.insert(0, str(tmp_path))

    err = _error({"kind": kind, "path": "d.jsonl"})

    assert err.received == kind and "estflow.dsl.sources.Source" in err.expected
    assert f"module {kind.split(':')[0]!r} holds" in str(err)


def test_a_kind_declared_in_main_says_where_to_declare_it():
    err = _error({"kind": "__main__:JsonLinesSource", "path": "d.jsonl"})
    assert "__main__" in str(err) and "pipeline file" in str(err)


@pytest.mark.parametrize("kind", ["a b:C", "mod:", ":C", "mod:C:D", "1mod:C"])
def test_a_malformed_kind_is_refused_without_importing(kind):
    err = _error({"kind": kind})
    assert err.path == "kind" and err.received == kind

"""A local CSV source's header is checked against the declaration before any step runs, every
mismatch at once (``estflow run``, ``estflow preprocess``, and ``estflow compile`` when the data
is readable on this machine)."""

from __future__ import annotations

import gzip
import textwrap
from pathlib import Path

import pytest

import estflow.dsl as ef
from estflow.pipelines import cli
from estflow.pipelines import data_check
from estflow.pipelines import loader
from estflow.pipelines.examples import taxi

_PIPELINE = """
import estflow.dsl as ef

pipeline = ef.Pipeline(
    name="tiny", source=ef.CsvSource({path!r}), features=(ef.Numeric("x", default=0.0),),
    columns=(ef.Column("tips", "float", default=0.0),),
    derive=ef.Derive("tiny_hooks:big", outputs=(ef.Column("big", "int"),)),
    label=ef.Label({label!r}), model=ef.LinearClassifier(feature_columns=("x",)),
    train=ef.TrainSpec(max_steps=5))
"""


def _write(tmp_path: Path, header: str, *, label: str = "big", path: str = "data.csv") -> Path:
    (tmp_path / "data.csv").write_text(header + "\n1,2,3\n")
    target = tmp_path / "tiny.py"
    target.write_text(textwrap.dedent(_PIPELINE.format(path=path, label=label)))
    return target


def _pipeline(source=None, **changes) -> ef.Pipeline:
    base = dict(name="tiny", source=source or ef.CsvSource("data.csv"),
                features=(ef.Numeric("x", default=0.0), ef.CategoricalVocab("c", default="")),
                label=ef.Label("y"), model=ef.LinearClassifier(feature_columns=("x", "c")),
                train=ef.TrainSpec(max_steps=5))
    return ef.Pipeline(**{**base, **changes})


def test_every_missing_column_is_named_with_the_field_that_reads_it(tmp_path):
    (tmp_path / "data.csv").write_text("x,colour,label\n1,red,0\n")
    with pytest.raises(ef.DslErrors) as info:
        data_check.check_local_source(_pipeline(), str(tmp_path))
    errors = {e.path: e for e in info.value.errors}
    assert list(errors) == ["features[1].name", "label.name"]
    assert errors["features[1].name"].received == "c"
    assert "a column of" in errors["features[1].name"].expected
    assert "data.csv (header: x, colour, label)" in errors["features[1].name"].expected
    assert errors["label.name"].received == "y"


def test_a_label_that_is_neither_a_column_nor_derived_names_both(tmp_path):
    target = _write(tmp_path, "x,tips,bigg", label="bigg_tipper")
    errors = data_check.header_errors(loader.load(str(target)).pipeline, str(tmp_path))
    assert [e.path for e in errors] == ["label.name"]
    err = errors[0]
    assert "or an output of derive (big)" in err.expected
    assert err.received == "bigg_tipper"


def test_a_matching_header_passes_and_the_taxi_example_matches_its_data():
    data_check.check_local_source(taxi.pipeline, str(Path(taxi.__file__).parent))


def test_unseen_columns_are_refused_only_when_the_schema_check_says_so(tmp_path):
    (tmp_path / "data.csv").write_text("x,c,y,extra,more\n")
    data_check.check_local_source(_pipeline(), str(tmp_path))
    strict = ef.CsvSource("data.csv", schema_check=ef.SchemaCheck(allow_unseen_columns=False))
    with pytest.raises(ef.DslErrors) as info:
        data_check.check_local_source(_pipeline(strict), str(tmp_path))
    [err] = info.value.errors
    assert err.path == "source.schema_check.allow_unseen_columns"
    assert err.received == ["extra", "more"]


def test_a_wrong_delimiter_is_hinted_and_gzip_and_globs_are_read(tmp_path):
    (tmp_path / "a.csv.gz").write_bytes(gzip.compress(b"x;c;y\n1;a;0\n"))
    (tmp_path / "b.csv").write_text("x,c,y,y\n")
    with pytest.raises(ef.DslErrors) as info:
        data_check.check_local_source(_pipeline(ef.CsvSource("*.csv*")), str(tmp_path))
    text = str(info.value)
    assert "a.csv.gz" in text and "source.delimiter is ','" in text and "';'" in text
    assert "b.csv" in text and "appears 2 times" in text


@pytest.mark.parametrize("source", [
    ef.CsvSource("gs://bucket/data.csv"), ef.CsvSource("no_such_dir/*.csv"),
    ef.ParquetSource("data.csv"),
])
def test_sources_not_readable_here_are_not_checked(tmp_path, source):
    (tmp_path / "data.csv").write_text("nothing,matches\n")
    data_check.check_local_source(_pipeline(source), str(tmp_path))


@pytest.mark.parametrize("command", [
    ["run", "{target}", "--workdir", "{tmp}/run"],
    ["preprocess", "{target}", "--output", "{tmp}/run"],
    ["compile", "{target}", "-o", "{tmp}/run.yaml"],
])
def test_the_cli_stops_before_any_step_with_every_mismatch(tmp_path, capsys, command):
    target = _write(tmp_path, "x,tip,label", label="tipped")
    args = [a.format(target=target, tmp=tmp_path) for a in command]
    assert cli.main(args) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"estflow {command[0]}: error: ")
    # compile reports it among every other refusal (here: no --image), run and preprocess alone
    assert f"the data of the pipeline in {target} does not match its declaration" in err
    assert command[0] == "compile" or err.startswith(
        f"estflow {command[0]}: error: the data of the pipeline in {target}")
    assert "`columns[0].name`" in err and "`label.name`" in err and "Traceback" not in err
    assert not (tmp_path / "run").exists() and not (tmp_path / "run.yaml").exists()


def test_compile_does_not_need_the_data(tmp_path, capsys):
    target = _write(tmp_path, "x,tips", path="elsewhere/data.csv")
    assert cli.main(["compile", str(target), "-o", str(tmp_path / "t.yaml"),
                     "--image", "r/estflow:1"]) == 0

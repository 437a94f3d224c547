"""``estflow init DATA.csv``: what it infers from a CSV's header and rows (dtypes, missing cells
and their tokens, the label's kind), the pipeline file it writes (valid, loadable by ``estflow
run``'s loader, its data's header matching), and its errors (no such file, no header, a label
that is not a column, an existing file). No TensorFlow: the file is only loaded, never run
(tests/pipelines/test_own_project_e2e.py runs one)."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

import estflow.dsl as ef
from estflow.dsl.sources import NA_VALUES
from estflow.pipelines import cli
from estflow.pipelines import loader
from estflow.pipelines.cli import scaffold


def _csv(path: Path, header, rows, delimiter=",") -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, delimiter=delimiter, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    return path


PENGUIN_ROWS = [
    ("Adelie", "Torgersen", "39.1", "181", "male", "p1"),
    ("Adelie", "Dream", "NA", "NA", "NA", "p2"),
    ("Gentoo", "Biscoe", "46.5", "217", "female", "p3"),
    ("Chinstrap", "Dream", "49.0", "195", "", "p4"),
    ("Gentoo", "Biscoe", "47.3", "215", "male", "p5"),
    ("Chinstrap", "Dream", "50.2", "198", "female", "p6"),
] * 5
PENGUIN_HEADER = ("species", "island", "bill_length_mm", "flipper_length_mm", "sex", "row_id")


@pytest.fixture
def penguins(tmp_path) -> Path:
    rows = [r[:-1] + (f"p{i}",) for i, r in enumerate(PENGUIN_ROWS)]  # an identifier column
    return _csv(tmp_path / "penguins.csv", PENGUIN_HEADER, rows)


# --- inference ---------------------------------------------------------------------------------

def test_dtypes_missing_cells_and_their_tokens(penguins):
    profile = scaffold.profile_csv(penguins)
    got = {c.name: (c.dtype, c.missing, c.tokens, c.empty) for c in profile.columns}
    assert got == {
        "species": ("string", 0, (), 0),
        "island": ("string", 0, (), 0),
        "bill_length_mm": ("float", 5, ("NA",), 0),
        "flipper_length_mm": ("int", 5, ("NA",), 0),
        "sex": ("string", 10, ("NA",), 5),  # "NA" five times, "" five times
        "row_id": ("string", 0, (), 0),
    }
    assert profile.rows == 30 and profile.complete and profile.delimiter == ","
    assert profile.column("flipper_length_mm").median == 198


@pytest.mark.parametrize(("cells", "dtype", "tokens"), [
    (["1", "2", "-3", " 4"], "int", ()),
    (["1", "2.5", "1e3", "NaN"], "float", ("NaN",)),
    (["1", "?", "3", "-"], "int", ("?", "-")),
    (["1", "2", "N/A", "null", ""], "int", ("N/A", "null")),
    (["a", "b", "NA", "n/a", "?"], "string", ("NA", "n/a", "?")),
    (["1", "2", "x"], "string", ()),
    (["1_000", "2"], "string", ()),  # Python's float() takes 1_000; ingest does not
    (["inf", "1.0"], "string", ()),  # not finite: ingest would reject it
    (["true", "false"], "string", ()),
])
def test_a_column_is_the_narrowest_type_its_cells_fit(cells, dtype, tokens):
    column = scaffold._profile_column("c", cells)
    assert (column.dtype, column.tokens) == (dtype, tokens)


def test_a_mostly_numeric_column_says_which_cells_are_not_numbers():
    column = scaffold._profile_column("c", [str(i) for i in range(30)] + ["oops"])
    assert column.dtype == "string" and column.not_numbers == ("oops",)


@pytest.mark.parametrize(("values", "kind", "dtype", "n_classes"), [
    (["Adelie", "Gentoo", "Chinstrap"], "multi_class", "string", 3),
    (["yes", "no"], "binary", "string", 2),
    (["0", "1"], "binary", "int", 2),
    (["0", "1", "2", "3"], "multi_class", "int", 4),
    (["1", "2", "3", "5"], "regression", "float", 0),  # not class ids 0..k-1
    (["0.5", "1.25", "3"], "regression", "float", 0),
])
def test_the_label_kind(tmp_path, values, kind, dtype, n_classes):
    rows = [(str(i), values[i % len(values)]) for i in range(12)]
    profile = scaffold.profile_csv(_csv(tmp_path / "d.csv", ("x", "y"), rows))
    label = scaffold.propose(profile, "y").label
    assert (label.kind, label.dtype, label.n_classes) == (kind, dtype, n_classes)
    if dtype == "string":
        assert label.classes == tuple(sorted(values))


def test_the_proposal_for_penguins(penguins):
    proposal = scaffold.propose(scaffold.profile_csv(penguins), "species")
    assert proposal.label.classes == ("Adelie", "Chinstrap", "Gentoo")
    assert {f.column.name: (f.kind, f.default) for f in proposal.features} == {
        "island": ("CategoricalVocab", None),
        "bill_length_mm": ("Numeric", 47.3),
        "flipper_length_mm": ("Numeric", 198),
        "sex": ("CategoricalVocab", ""),
    }
    assert [f.column.name for f in proposal.left_out] == ["row_id"]
    # "NA" in a string column is a category unless declared missing; in a numeric one it is
    # among the default tokens
    assert proposal.column_na_values == {"sex": ("", "NA")}
    assert proposal.max_rejected_fraction is None and proposal.rejected == 0
    assert (proposal.name, proposal.model_name) == ("penguins", "penguins")


def test_numeric_tokens_beyond_the_default_are_declared_for_their_column(tmp_path):
    rows = [(str(i), "?" if i % 4 == 0 else str(i * 2), "a" if i % 2 else "b")
            for i in range(12)]
    proposal = scaffold.propose(scaffold.profile_csv(
        _csv(tmp_path / "d.csv", ("x", "z", "y"), rows)), "y")
    assert proposal.column_na_values == {"z": NA_VALUES + ("?",)}


def test_rows_without_a_label_are_rejected_and_the_source_allows_them(tmp_path):
    rows = [(str(i), "NA" if i % 10 == 0 else "ab"[i % 2]) for i in range(40)]
    proposal = scaffold.propose(scaffold.profile_csv(_csv(tmp_path / "d.csv", ("x", "y"),
                                                          rows)), "y")
    assert proposal.label.classes == ("a", "b")  # "NA" is not a class
    assert proposal.column_na_values == {"y": ("", "NA")}
    assert proposal.rejected == 4
    assert proposal.max_rejected_fraction == 0.15  # 10% of the rows, 1.5x, rounded up


def test_the_label_without_label_option(tmp_path):
    named = scaffold.profile_csv(_csv(tmp_path / "a.csv", ("target", "x"), [("1", "2"),
                                                                           ("0", "3")]))
    assert scaffold.propose(named).label.chosen_by == "named 'target'"
    last = scaffold.profile_csv(_csv(tmp_path / "b.csv", ("x", "kind"), [("1", "a"),
                                                                       ("2", "b")]))
    plan = scaffold.propose(last).label
    assert (plan.column.name, plan.chosen_by) == ("kind", "the last column")


def test_the_delimiter_is_sniffed_and_compressed_files_are_read(tmp_path):
    path = _csv(tmp_path / "d.csv", ("a", "b", "y"), [("1", "x", "p"), ("2", "z", "q")], ";")
    assert scaffold.profile_csv(path).delimiter == ";"
    import gzip

    packed = tmp_path / "e.csv.gz"
    packed.write_bytes(gzip.compress(b"\xef\xbb\xbfa,y\n1,p\n2,q\n"))  # with a BOM
    profile = scaffold.profile_csv(packed)
    assert profile.header == ("a", "y") and profile.rows == 2


# --- errors ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "message"), [
    ("", "is empty: expected a header row"),
    ("1.5,2,3\n4,5,6\n", "looks like data, not a header"),
    ("a,b,a\n1,2,3\n", "names 'a' more than once"),
    ("a,b\n", "has a header (a, b) but no data rows"),
])
def test_files_that_cannot_be_scaffolded(tmp_path, text, message):
    (tmp_path / "d.csv").write_text(text)
    with pytest.raises(scaffold.ScaffoldError, match=message.replace("(", r"\(")
                       .replace(")", r"\)")):
        scaffold.profile_csv(tmp_path / "d.csv")


def test_a_label_that_is_not_a_column_names_the_columns_and_the_closest(penguins):
    profile = scaffold.profile_csv(penguins)
    with pytest.raises(scaffold.ScaffoldError) as err:
        scaffold.propose(profile, "specie")
    assert str(err.value) == (
        f"--label 'specie' is not a column of {penguins} (did you mean 'species'?); its "
        "columns: species, island, bill_length_mm, flipper_length_mm, sex, row_id")
    with pytest.raises(scaffold.ScaffoldError, match="did you mean 'species'"):
        scaffold.propose(profile, "Species")


@pytest.mark.parametrize(("values", "message"), [
    (["a"] * 5, "has one value ('a')"),
    (["", "NA"] * 3, "has no value in the 6 rows read"),
])
def test_a_column_that_cannot_be_a_label(tmp_path, values, message):
    rows = [(str(i), v) for i, v in enumerate(values)]
    profile = scaffold.profile_csv(_csv(tmp_path / "d.csv", ("x", "y"), rows))
    with pytest.raises(scaffold.ScaffoldError, match=message.replace("(", r"\(")
                       .replace(")", r"\)")):
        scaffold.propose(profile, "y")


def test_a_column_name_estflow_cannot_declare_is_left_out_and_said_so(tmp_path):
    profile = scaffold.profile_csv(_csv(tmp_path / "d.csv", ("body mass", "x", "y"),
                                        [("1", "2", "a"), ("3", "4", "b")]))
    proposal = scaffold.propose(profile, "y")
    assert [f.column.name for f in proposal.left_out] == ["body mass"]
    assert "rename it in the header" in proposal.left_out[0].reason
    with pytest.raises(scaffold.ScaffoldError, match="rename it in the header"):
        scaffold.propose(profile, "body mass")


# --- the command and its file ------------------------------------------------------------------

def test_init_writes_a_pipeline_that_loads_and_fits_its_data(penguins, monkeypatch, capsys):
    monkeypatch.chdir(penguins.parent)
    assert cli.main(["init", "penguins.csv", "--label", "species", "--max-steps", "50"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("estflow init: wrote penguins.py from penguins.csv (30 rows)\n")
    assert "  label    species: 3 classes: Adelie, Chinstrap, Gentoo\n" in out
    assert "  left out row_id: every value distinct (an identifier, or free text?)" in out
    assert out.endswith("Next: estflow run penguins.py\n")
    text = (penguins.parent / "penguins.py").read_text()
    assert "    estflow init penguins.csv --label species --max-steps 50\n" in text
    pipeline = loader.load("penguins.py").pipeline
    assert pipeline.source == ef.CsvSource("penguins.csv", column_na_values={"sex": ("", "NA")})
    assert pipeline.label == ef.Label("species", dtype="string",
                                      vocabulary=("Adelie", "Chinstrap", "Gentoo"))
    assert pipeline.model.n_classes == 3
    assert pipeline.model.label_vocabulary == ("Adelie", "Chinstrap", "Gentoo")
    assert pipeline.train.max_steps == 50
    assert pipeline.push == ef.PushTarget("serving_models", "penguins")
    assert [f.name for f in pipeline.features] == ["island", "bill_length_mm",
                                                   "flipper_length_mm", "sex"]
    assert pipeline.header_errors(PENGUIN_HEADER, "penguins.csv") == []
    assert max(len(line) for line in text.splitlines()) <= 100


def test_the_file_finds_its_data_from_another_folder(penguins, tmp_path, monkeypatch):
    (tmp_path / "project").mkdir()
    monkeypatch.chdir(tmp_path / "project")
    assert cli.main(["init", str(penguins), "--label", "species", "-o", "Penguins 2.py"]) == 0
    pipeline = loader.load("Penguins 2.py").pipeline
    assert pipeline.source.path == "../penguins.csv"
    assert (pipeline.name, pipeline.push.model_name) == ("penguins-2", "penguins_2")


@pytest.mark.parametrize(("kind", "rows", "model"), [
    ("binary", [(str(i), str(i % 2)) for i in range(10)], ef.DNNClassifier),
    ("regression", [(str(i), f"{i * 0.5}") for i in range(10)], ef.DNNRegressor),
])
def test_int_and_float_labels_write_their_model(tmp_path, monkeypatch, kind, rows, model):
    monkeypatch.chdir(tmp_path)
    _csv(tmp_path / "d.csv", ("x", "y"), rows)
    assert cli.main(["init", "d.csv", "--label", "y"]) == 0
    pipeline = loader.load("d.py").pipeline
    assert isinstance(pipeline.model, model)
    assert pipeline.label.dtype == ("int" if kind == "binary" else "float")


def test_init_never_overwrites_and_names_its_errors(penguins, monkeypatch, capsys):
    monkeypatch.chdir(penguins.parent)
    (penguins.parent / "penguins.py").write_text("# mine\n")
    assert cli.main(["init", "penguins.csv"]) == 2
    err = capsys.readouterr().err
    assert err == ("estflow init: error: penguins.py exists: estflow init never overwrites a "
                   "file; remove it or give another with -o PIPELINE.py\n")
    assert (penguins.parent / "penguins.py").read_text() == "# mine\n"
    assert cli.main(["init", "nope.csv", "-o", "x.py"]) == 2
    assert capsys.readouterr().err == "estflow init: error: nope.csv: no such file\n"
    assert cli.main(["init", "penguins.csv", "--label", "specie", "-o", "x.py"]) == 2
    assert "did you mean 'species'?" in capsys.readouterr().err
    assert cli.main(["init", "penguins.csv", "-o", "x.txt"]) == 2
    assert "expected a .py file" in capsys.readouterr().err
    assert not (penguins.parent / "x.py").exists()


def test_init_imports_no_tensorflow_beam_or_kfp(penguins):
    code = ("import sys\nfrom estflow.pipelines import cli\n"
            f"assert cli.main(['init', {str(penguins)!r}, '-o', {str(penguins.parent / 'p.py')!r}"
            "]) == 0\n"
            "heavy = [m for m in sys.modules if m.split('.')[0] in "
            "('tensorflow', 'apache_beam', 'tensorflow_transform', 'kfp')]\n"
            "assert not heavy, heavy\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr

"""A first pipeline for a CSV file, from its header and a sample of its rows (``estflow init``).

:func:`profile_csv` reads the header and up to ``sample_rows`` rows with the standard library's
``csv`` (no TensorFlow, no Beam) and describes each column: the dtype its cells fit (``int``,
``float``, else ``string``), how many cells are missing and which missing-value tokens appear
(``""``, ``NA``, ``N/A``, ``null``, ``?``, ...), and its distinct values. :func:`propose`
turns that into declarations: the label (a string label with its class names, an int 0/1 label,
a float one), a feature per usable column (``Numeric`` with ``z_score`` for numbers,
``CategoricalVocab`` for strings, a sample median or ``""`` as the default of a column with
missing cells), the source's missing-value tokens where they differ from ``CsvSource``'s, and
a model for the label's kind. :func:`render` writes it as a readable, commented pipeline file
that ``estflow run`` takes as it is.

Example:
    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "flowers.csv").write_text("petal,colour,kind\\n1.5,red,a\\n2.5,NA,b\\n")
    >>> profile = profile_csv(folder / "flowers.csv")
    >>> [(c.name, c.dtype, c.tokens) for c in profile.columns]
    [('petal', 'float', ()), ('colour', 'string', ('NA',)), ('kind', 'string', ())]
    >>> proposal = propose(profile, label="kind")
    >>> proposal.label.classes
    ('a', 'b')
"""

from __future__ import annotations

import csv
import dataclasses
import difflib
import math
import re
import statistics
from collections import Counter
from pathlib import Path

from estflow.dsl.sources import NA_VALUES
from estflow.pipelines.data_check import OPENERS

__all__ = ["ScaffoldError", "ColumnProfile", "Profile", "LabelPlan", "FeaturePlan", "Proposal",
           "profile_csv", "propose", "render", "NUMERIC_NA", "STRING_NA", "SAMPLE_ROWS",
           "MAX_CLASSES", "MAX_VOCAB"]

SAMPLE_ROWS = 100_000
"""Rows read by default: enough to see a column's values, quick on a large file."""
STRING_NA = NA_VALUES + ("na", "n/a", "N/a", "Na", "None", "none", "NONE", "Null", "#N/A", "?",
                         ".")
"""Cells read as missing when they appear in a string column (CsvSource's own default for
string columns is only ``""``: the others are declared in ``column_na_values``)."""
NUMERIC_NA = STRING_NA + ("-", "--")
"""Cells read as missing when they appear among a column's numbers."""
MAX_CLASSES = 1000
"""A string or int label with more distinct values than this is refused."""
MAX_VOCAB = 100
"""A string feature with more distinct values keeps its ``top_k`` most frequent ones."""
_DISTINCT_CAP = 10_000  # distinct values counted per column (memory stays bounded)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_INT = re.compile(r"^\s*[+-]?[0-9]+\s*$")
_LABEL_NAMES = ("label", "target", "class", "y", "outcome")
_DELIMITERS = ",;\t|"


class ScaffoldError(ValueError):
    """The file cannot be scaffolded (no such file, no header, no data, a bad label)."""


@dataclasses.dataclass
class ColumnProfile:
    """What the sample shows of one column."""

    name: str
    dtype: str = "string"
    """``int``, ``float`` or ``string``: the narrowest the non-missing cells fit."""
    missing: int = 0
    """Cells read as missing (one of ``tokens``, or the empty cell)."""
    tokens: tuple[str, ...] = ()
    """The missing-value tokens that appear, other than the empty cell, in order of first
    appearance."""
    empty: int = 0
    """Empty cells (``""``), counted in ``missing``."""
    distinct: int = 0
    """Distinct non-missing values (at most ``_DISTINCT_CAP`` are counted)."""
    present: int = 0
    """Non-missing cells."""
    values: tuple[str, ...] = ()
    """The distinct non-missing values, most frequent first (all of them when ``distinct`` is
    under the cap)."""
    median: float | None = None
    """Numeric columns: the median of the sample's values."""
    std: float | None = None
    """Numeric columns: the standard deviation of the sample's values."""
    not_numbers: tuple[str, ...] = ()
    """String columns whose cells are mostly numbers: a few of the cells that are not."""

    @property
    def valid_name(self) -> bool:
        """Whether estflow can declare it (an identifier)."""
        return bool(_NAME.match(self.name))

    @property
    def all_distinct(self) -> bool:
        """Every non-missing value is different (an identifier, free text)."""
        return self.present > 20 and self.distinct == self.present


@dataclasses.dataclass
class Profile:
    """What :func:`profile_csv` read."""

    path: Path
    delimiter: str
    header: tuple[str, ...]
    columns: list[ColumnProfile]
    rows: int
    """Data rows read (blank lines not counted)."""
    complete: bool
    """Whether the whole file was read (else the first ``rows`` rows)."""
    ragged: int = 0
    """Rows whose number of fields is not the header's (ingest rejects them)."""
    multiline: bool = False
    """Whether a quoted value spans lines (``CsvSource(multiline_values=True)``)."""

    def column(self, name: str) -> ColumnProfile:
        return next(c for c in self.columns if c.name == name)


def profile_csv(path: str | Path, delimiter: str | None = None,
                sample_rows: int = SAMPLE_ROWS) -> Profile:
    """Profile the CSV file at ``path`` from its header and its first ``sample_rows`` rows.

    Raises:
        ScaffoldError: no such file, not UTF-8 CSV, empty, no header row, no data row.
    """
    path = Path(path)
    if not path.exists():
        raise ScaffoldError(f"{path}: no such file")
    if not path.is_file():
        raise ScaffoldError(f"{path}: not a file")
    opener = OPENERS.get(path.suffix.lower(), open)
    try:
        if delimiter is None:
            with opener(path, "rt", encoding="utf-8-sig", newline="") as f:
                delimiter = _sniff(f.readline())
        with opener(path, "rt", encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f, delimiter=delimiter)
            header = next(reader, None)
            if not header or header == [""]:
                raise ScaffoldError(f"{path} is empty: expected a header row naming the "
                                    "columns, then the data rows")
            _check_header(path, header)
            cells: list[list[str]] = [[] for _ in header]
            rows = ragged = 0
            multiline = False
            complete = True
            for row in reader:
                if not row:  # a blank line: ingest skips it too
                    continue
                if rows >= sample_rows:
                    complete = False
                    break
                rows += 1
                if len(row) != len(header):
                    ragged += 1
                    continue
                for i, cell in enumerate(row):
                    cells[i].append(cell)
                    if not multiline and ("\n" in cell or "\r" in cell):
                        multiline = True
    except UnicodeDecodeError as err:
        raise ScaffoldError(f"{path} is not UTF-8 text ({err.reason} at byte {err.start}): "
                            "estflow reads CSV files as UTF-8") from None
    except csv.Error as err:
        raise ScaffoldError(f"{path} is not readable as CSV: {err}") from None
    except (OSError, EOFError) as err:
        raise ScaffoldError(f"{path}: cannot be read: {err}") from None
    if rows == ragged:
        raise ScaffoldError(f"{path} has a header ({', '.join(header)}) but no data rows"
                            + (f" with its {len(header)} fields" if rows else ""))
    columns = [_profile_column(name, values) for name, values in zip(header, cells, strict=True)]
    return Profile(path, delimiter, tuple(header), columns, rows, complete, ragged, multiline)


def _sniff(first: str) -> str:
    """The delimiter of the header line: the candidate that splits it most (``,`` on a tie
    or when none does)."""
    counts = {d: len(next(csv.reader([first], delimiter=d), [])) for d in _DELIMITERS}
    best = max(_DELIMITERS, key=lambda d: (counts[d], d == ","))
    return best if counts[best] > 1 else ","


def _check_header(path: Path, header: list[str]) -> None:
    if all(_is_number(cell) or cell in NUMERIC_NA for cell in header):
        shown = ", ".join(header[:5]) + (", ..." if len(header) > 5 else "")
        raise ScaffoldError(f"{path}: the first row ({shown}) looks like data, not a header: "
                            "estflow reads CSV files whose first row names the columns; add "
                            "one")
    twice = sorted({name for name in header if header.count(name) > 1})
    if twice:
        raise ScaffoldError(f"{path}: the header names {', '.join(map(repr, twice))} more than "
                            "once: each column needs a name of its own")


def _is_number(cell: str) -> bool:
    return _parse_number(cell) is not None


def _parse_number(cell: str) -> int | float | None:
    """The number ``cell`` is as ingest reads it (an int, a finite float), else None."""
    if _INT.match(cell):
        value = int(cell)
        return value if -2**63 <= value < 2**63 else float(value)
    if "_" in cell:
        return None
    try:
        value = float(cell)
    except ValueError:
        return None
    return value if math.isfinite(value) and abs(value) <= 3.4e38 else None


def _profile_column(name: str, cells: list[str]) -> ColumnProfile:
    profile = ColumnProfile(name)
    numbers: list[int | float] = []
    numeric_tokens: Counter[str] = Counter()
    others: list[str] = []
    for cell in cells:
        number = None if cell in NUMERIC_NA else _parse_number(cell)
        if number is not None:
            numbers.append(number)
        elif cell in NUMERIC_NA:
            numeric_tokens[cell] += 1
        else:
            others.append(cell)
    if numbers and not others:
        profile.dtype = "int" if all(isinstance(n, int) for n in numbers) else "float"
        counts = Counter(n for n in numbers)
        profile.present = len(numbers)
        profile.missing = sum(numeric_tokens.values())
        profile.tokens = tuple(t for t in numeric_tokens if t)
        profile.empty = numeric_tokens[""]
        profile.median = statistics.median(numbers)
        profile.std = statistics.pstdev(numbers)
        profile.distinct = len(counts)
        profile.values = tuple(str(v) for v, _ in counts.most_common(_DISTINCT_CAP))
        return profile
    counts: Counter[str] = Counter()
    string_tokens: Counter[str] = Counter()
    for cell in cells:
        if cell in STRING_NA:
            string_tokens[cell] += 1
        elif len(counts) < _DISTINCT_CAP or cell in counts:
            counts[cell] += 1
    profile.dtype = "string"
    profile.missing = sum(string_tokens.values())
    profile.tokens = tuple(t for t in string_tokens if t)
    profile.empty = string_tokens[""]
    profile.present = len(cells) - profile.missing
    profile.distinct = len(counts)
    profile.values = tuple(v for v, _ in counts.most_common())
    if numbers and len(numbers) >= 9 * len(others):  # mostly numbers: say which are not
        profile.not_numbers = tuple(dict.fromkeys(others))[:3]
    return profile


# --- what to declare ---------------------------------------------------------------------------

@dataclasses.dataclass
class LabelPlan:
    """The label: its column, dtype, class names (string) or kind."""

    column: ColumnProfile
    kind: str
    """``"multi_class"`` / ``"binary"`` (a classifier) or ``"regression"``."""
    dtype: str
    classes: tuple[str, ...] = ()
    """A string label's class names, in class-id order (sorted)."""
    n_classes: int = 0
    chosen_by: str = "--label"
    """How it was chosen: ``--label``, or the rule that picked it."""


@dataclasses.dataclass
class FeaturePlan:
    """One column's declaration: ``kind`` (``Numeric``, ``CategoricalVocab``) and its options,
    or why it is left out (``reason``, ``kind`` empty)."""

    column: ColumnProfile
    kind: str = ""
    default: int | float | str | None = None
    top_k: int | None = None
    reason: str = ""


@dataclasses.dataclass
class Proposal:
    """Everything :func:`render` writes."""

    profile: Profile
    label: LabelPlan
    features: list[FeaturePlan]
    left_out: list[FeaturePlan]
    column_na_values: dict[str, tuple[str, ...]]
    max_rejected_fraction: float | None
    """Set when the sample's rows without a label (or with the wrong number of fields) are
    more than CsvSource's default allows (0.01); None: the default."""
    rejected: int
    """Rows of the sample ingest will reject (no label, wrong number of fields)."""
    name: str
    model_name: str
    max_steps: int
    batch_size: int


def propose(profile: Profile, label: str | None = None, name: str | None = None,
            max_steps: int | None = None) -> Proposal:
    """The declarations for ``profile``, with ``label`` as the label column (None: a column
    named label, target, class, y or outcome, else the last one).

    Raises:
        ScaffoldError: the label is not a column (the columns are named, and the closest), or
            cannot be a label (one value, too many classes, no value, not an identifier);
            no column is left to be a feature.
    """
    plan = _label(profile, label)
    tokens = {c.name: _declared_tokens(c) for c in profile.columns if c.valid_name}
    tokens = {k: v for k, v in tokens.items() if v is not None}
    features, left_out = [], []
    for column in profile.columns:
        if column is plan.column:
            continue
        feature = _feature(column)
        (features if feature.kind else left_out).append(feature)
    if not features:
        raise ScaffoldError(f"{profile.path}: no column but the label {plan.column.name!r} "
                            "can be a feature: "
                            + "; ".join(f"{f.column.name!r}: {f.reason}" for f in left_out))
    for feature in left_out:
        tokens.pop(feature.column.name, None)
    rejected = plan.column.missing + profile.ragged
    fraction = rejected / profile.rows if profile.rows else 0.0
    max_rejected = None
    if fraction > 0.01:
        max_rejected = min(1.0, math.ceil(fraction * 150) / 100)  # 1.5x, rounded up to 1%
    stem = name or profile.path.name.split(".")[0]
    pipeline_name = _pipeline_name(stem)
    rows_train = max(1, round(profile.rows * 0.8))
    batch = 32 if rows_train < 5000 else 128 if rows_train < 100_000 else 256
    steps = max_steps or min(20_000, max(200, math.ceil(30 * rows_train / batch / 100) * 100))
    return Proposal(profile, plan, features, left_out, tokens, max_rejected, rejected,
                    pipeline_name, _model_name(pipeline_name), steps, batch)


def _label(profile: Profile, label: str | None) -> LabelPlan:
    names = [c.name for c in profile.columns]
    chosen_by = "--label"
    if label is None:
        named = [n for n in names if n.lower() in _LABEL_NAMES]
        label, chosen_by = (named[0], f"named {named[0]!r}") if named else (
            names[-1], "the last column")
    if label not in names:
        raise ScaffoldError(f"--label {label!r} is not a column of {profile.path}"
                            f"{_did_you_mean(label, names)}; its columns: {', '.join(names)}")
    column = profile.column(label)
    if not column.valid_name:
        raise ScaffoldError(f"the label column {label!r} is not a name estflow can declare "
                            "(letters, digits, underscores; not starting with a digit): rename "
                            f"it in the header of {profile.path}")
    if column.present == 0:
        raise ScaffoldError(f"the label column {label!r} has no value in the {profile.rows} "
                            "rows read")
    if column.distinct < 2:
        raise ScaffoldError(f"the label column {label!r} has one value ({column.values[0]!r}) "
                            f"in the {profile.rows} rows read: nothing to learn")
    if column.dtype == "float":
        return LabelPlan(column, "regression", "float", chosen_by=chosen_by)
    if column.dtype == "int":
        ids = {int(v) for v in column.values}
        if ids == set(range(len(ids))) and len(ids) <= MAX_CLASSES:
            kind = "binary" if len(ids) == 2 else "multi_class"
            return LabelPlan(column, kind, "int", n_classes=len(ids), chosen_by=chosen_by)
        return LabelPlan(column, "regression", "float", chosen_by=chosen_by)
    if column.distinct > MAX_CLASSES:
        raise ScaffoldError(f"the label column {label!r} has {column.distinct}"
                            f"{'+' if column.distinct >= _DISTINCT_CAP else ''} distinct "
                            f"values, more than {MAX_CLASSES} classes: is it the label?")
    classes = tuple(sorted(column.values))
    return LabelPlan(column, "binary" if len(classes) == 2 else "multi_class", "string",
                     classes=classes, n_classes=len(classes), chosen_by=chosen_by)


def _did_you_mean(name: str, names: list[str]) -> str:
    folded = [n for n in names if n.lower() == name.lower()]
    close = folded or difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _declared_tokens(column: ColumnProfile) -> tuple[str, ...] | None:
    """The column's ``column_na_values`` entry, None where CsvSource's default tokens for its
    dtype already cover what appears."""
    if column.dtype == "string":
        return ("",) + column.tokens if column.tokens else None
    extra = tuple(t for t in column.tokens if t not in NA_VALUES)
    return NA_VALUES + extra if extra else None


def _feature(column: ColumnProfile) -> FeaturePlan:
    if not column.valid_name:
        return FeaturePlan(column, reason="not a name estflow can declare (letters, digits, "
                           "underscores; not starting with a digit): rename it in the header "
                           "to use it")
    if column.present == 0:
        return FeaturePlan(column, reason="no value in the rows read")
    if column.distinct == 1 and not column.missing:
        return FeaturePlan(column, reason=f"one value ({column.values[0]!r}) in every row")
    if column.dtype in ("int", "float"):
        if column.dtype == "int" and column.all_distinct and re.search(r"(^|_)id$",
                                                                       column.name.lower()):
            return FeaturePlan(column, reason="every value distinct (an identifier?)")
        default = None
        if column.missing:
            median = column.median
            default = int(round(median)) if column.dtype == "int" else float(f"{median:.6g}")
        return FeaturePlan(column, "Numeric", default)
    if column.all_distinct or column.distinct > 0.5 * column.present > MAX_VOCAB:
        what = "every value distinct" if column.all_distinct else \
            f"{column.distinct} distinct values in {column.present} cells"
        return FeaturePlan(column, reason=f"{what} (an identifier, or free text?)")
    return FeaturePlan(column, "CategoricalVocab", "" if column.missing else None,
                       top_k=MAX_VOCAB if column.distinct > MAX_VOCAB else None)


def _pipeline_name(stem: str) -> str:
    text = re.sub(r"[^a-z0-9_-]+", "-", stem.lower()).strip("-_")[:64].strip("-_")
    return text or "my-pipeline"


def _model_name(pipeline_name: str) -> str:
    text = re.sub(r"\W", "_", pipeline_name)
    return text if _NAME.match(text) else f"model_{text}"


# --- the file ----------------------------------------------------------------------------------

def render(proposal: Proposal, source_path: str, command: str, file_name: str) -> str:
    """The pipeline file ``file_name``: ``source_path`` is the CSV's path relative to the
    file's folder, ``command`` the ``estflow init`` command line that made it."""
    p, label = proposal.profile, proposal.label
    out = [f'"""{proposal.name}: a first pipeline for {p.path.name}, written by', "",
           f"    {command}", "",
           f"from its header and {_rows(p)}. It is an ordinary estflow pipeline: edit it (see the",
           "estflow docs: Your own data in ten minutes, The pipeline DSL), then run it::", "",
           f"    estflow run {file_name}", '"""', ""]
    out += ["import estflow.dsl as ef", ""]
    out += _summary(proposal)
    if label.classes:
        out += ["", "# The class names, in class-id order: predictions name them (\"classes\" in "
                ":predict, :classify", "# and estflow predict) and give class_ids and "
                "probabilities in this order.",
                "CLASSES = " + _tuple(label.classes, indent=len("CLASSES = (")), ""]
    out += ["", "pipeline = ef.Pipeline(", f"    name={_str(proposal.name)},"]
    out += _source(proposal, source_path)
    out += _features(proposal)
    out += _label_lines(proposal)
    out += _model(proposal)
    out += [f"    train=ef.TrainSpec(max_steps={proposal.max_steps}, "
            f"batch_size={proposal.batch_size}),",
            "    # The eval split's metrics gate the push: uncomment to push only a model that "
            "reaches them.",
            f"    # eval=ef.EvalSpec(thresholds=({_threshold(label)},)),",
            "    split=ef.Split(eval_fraction=0.2),",
            "    # estflow run pushes a blessed model to <base_path>/<model_name>/<version>/ "
            "(estflow serve",
            "    # serving_models, estflow predict serving_models/"
            f"{proposal.model_name} --input ...).",
            f"    push=ef.PushTarget(base_path=\"serving_models\", "
            f"model_name={_str(proposal.model_name)}),",
            ")", ""]
    return "\n".join(out)


def _rows(p: Profile) -> str:
    n = f"{p.rows:,} row{'s' if p.rows != 1 else ''}"
    return f"its {n}" if p.complete else f"its first {n}"


def _summary(proposal: Proposal) -> list[str]:
    """A comment table: each column, what the sample shows, what is declared."""
    rows = [("column", "type", "missing", "declared as")]
    label = proposal.label
    for column in proposal.profile.columns:
        missing = _missing(column)
        if column is label.column:
            what = f"label, {label.n_classes} classes" if label.n_classes else "label"
            if label.kind == "regression":
                what = "label (regression)"
            if column.missing:
                what += "; rows without one are rejected"
        else:
            feature = next(f for f in proposal.features + proposal.left_out
                           if f.column is column)
            what = feature.kind or "left out (see features)"
            if feature.kind and feature.default is not None:
                what += f", default {_str(feature.default)}"
            elif feature.kind:
                what += ", required"
        rows.append((column.name, column.dtype, missing, what))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["# What estflow init read, column by column (\"missing\": the cells read as "
             "missing, and", "# their tokens). A column with a default takes it where a cell "
             "is missing; a required one", "# (no default) rejects the row, listed with its "
             "reason in the ingest step's rejected.jsonl.", "#"]
    for row in rows:
        lines.append(("#   " + "  ".join(c.ljust(w) for c, w in zip(row[:3], widths, strict=True))
                      + "  " + row[3]).rstrip())
    p = proposal.profile
    if p.ragged:
        lines.append(f"#   {p.ragged} row(s) have another number of fields than the header: "
                     "ingest rejects them.")
    for column in p.columns:
        if column.not_numbers:
            shown = ", ".join(repr(v) for v in column.not_numbers)
            lines.append(f"#   {column.name}: mostly numbers, but also {shown}: a string "
                         "column; if those cells are errors, declare it Numeric (ingest "
                         "then rejects their rows).")
    return lines


def _missing(column: ColumnProfile) -> str:
    if not column.missing:
        return "0"
    shown = (['""'] if column.empty else []) + list(column.tokens)
    return f"{column.missing} ({', '.join(shown)})"


def _source(proposal: Proposal, source_path: str) -> list[str]:
    p = proposal.profile
    options = []
    if p.delimiter != ",":
        options.append(f"delimiter={_str(p.delimiter)}")
    if p.multiline:
        options.append("multiline_values=True")
    if proposal.max_rejected_fraction is not None:
        options.append(f"max_rejected_fraction={proposal.max_rejected_fraction}")
    lines = ["    # Missing cells: by default \"\", NA, N/A, NULL, null, NaN and nan in int and "
             "float columns",
             "    # (na_values); only \"\" in string columns (string_na_values), where \"NA\" "
             "would be a",
             "    # category. column_na_values gives a column its own tokens."]
    if proposal.max_rejected_fraction is not None:
        lines.append(f"    # max_rejected_fraction: {proposal.rejected} of the {p.rows} rows "
                     "read would be rejected (more than the default 1%).")
    head = f"    source=ef.CsvSource({_str(source_path)}" + "".join(f", {o}" for o in options)
    if not proposal.column_na_values:
        return lines + [head + "),"]
    entries = [f"{_str(name)}: {_tuple(tokens)}"
               for name, tokens in proposal.column_na_values.items()]
    one_line = f"{head}, column_na_values={{{', '.join(entries)}}}),"
    if len(one_line) <= 100:
        return lines + [one_line]
    return lines + [head + ",", "                        column_na_values={",
                     *(f"                            {entry}," for entry in entries),
                     "                        }),"]


def _features(proposal: Proposal) -> list[str]:
    lines = ["    # Numbers are z-scored; strings become a vocabulary (values not in it share one id).",
             "    # A column with missing cells has a default: the sample's median, or \"\".",
             "    features=("]
    for f in proposal.features:
        c = f.column
        args = [_str(c.name)]
        if f.kind == "Numeric":
            if c.dtype == "int":
                args.append('dtype="int"')
            if f.default is not None:
                args.append(f"default={_str(f.default)}")
            args.append('normalize="z_score"')
            note = ""
        else:
            if f.default is not None:
                args.append(f"default={_str(f.default)}")
            if f.top_k:
                args.append(f"top_k={f.top_k}")
            args.append("num_oov_buckets=1")
            note = _values(c, f.top_k)
        code = f"        ef.{f.kind}({', '.join(args)}),"
        if not note:
            lines.append(code)
        elif len(code) + len(note) + 4 <= 100:
            lines.append(f"{code}  # {note}")
        else:
            lines += [f"        # {note}", code]
    for f in proposal.left_out:
        lines.append(f"        # {f.column.name}: left out, {f.reason}")
    lines.append("    ),")
    return lines


def _number(value) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _values(column: ColumnProfile, top_k: int | None) -> str:
    if top_k:
        return f"{column.distinct} values: the {top_k} most frequent kept, the rest one id"
    shown = ", ".join(column.values[:4]) + (", ..." if column.distinct > 4 else "")
    return f"{column.distinct} value{'s' if column.distinct != 1 else ''}: {shown}"


def _label_lines(proposal: Proposal) -> list[str]:
    label = proposal.label
    name = label.column.name
    lines = []
    if label.column.missing:
        lines.append(f"    # A label is never filled in: the {label.column.missing} rows read "
                     f"without a {name} are rejected.")
    if label.dtype == "string":
        lines.append(f"    label=ef.Label({_str(name)}, dtype=\"string\", vocabulary=CLASSES),")
    elif label.dtype == "float":
        lines.append(f"    label=ef.Label({_str(name)}, dtype=\"float\"),")
    else:
        ids = ", ".join(str(i) for i in range(label.n_classes)) if label.n_classes <= 5 else \
            f"0 to {label.n_classes - 1}"
        lines.append(f"    label=ef.Label({_str(name)}),  # class ids {ids}")
    return lines


def _model(proposal: Proposal) -> list[str]:
    label = proposal.label
    columns = []
    for f in proposal.features:
        if f.kind == "Numeric":
            columns.append(_str(f.column.name))
        elif f.top_k or f.column.distinct > 20:
            columns.append(f"ef.Embedding({_str(f.column.name)}, dimension=8)")
        else:
            columns.append(f"ef.Indicator({_str(f.column.name)})")
    kind = "DNNRegressor" if label.kind == "regression" else "DNNClassifier"
    lines = [f"    model=ef.{kind}(", "        hidden_units=(16, 8),",
             "        feature_columns=" + _tuple(columns, quote=False,
                                                 indent=len("        feature_columns=(")) + ","]
    if label.kind != "regression":
        lines.append(f"        n_classes={label.n_classes},")
    if label.classes:
        lines.append("        label_vocabulary=CLASSES,")
    lines.append("    ),")
    return lines


def _threshold(label: LabelPlan) -> str:
    if label.kind == "regression":  # an rmse under the label's spread: better than its mean
        return (f'ef.Threshold("rmse", upper_bound={_number(label.column.std or 1.0)}, '
                "higher_is_better=False)")
    return 'ef.Threshold("accuracy", lower_bound=0.8)'


def _str(value) -> str:
    """A literal of ``value``; a string in double quotes where that needs no escape."""
    text = repr(value)
    if isinstance(value, str) and text.startswith("'") and '"' not in value \
            and "\\" not in text:
        return '"' + value + '"'
    return text


def _tuple(items, quote: bool = True, indent: int = 0, width: int = 100) -> str:
    """A tuple literal, wrapped at ``width`` with continuation lines at ``indent``."""
    parts = [_str(i) if quote else i for i in items]
    if len(parts) == 1:
        return f"({parts[0]},)"
    lines, line = [], "("
    for i, part in enumerate(parts):
        piece = part + (", " if i < len(parts) - 1 else ")")
        if len(line) + len(piece) + (0 if lines else indent) > width and line.strip("("):
            lines.append(line.rstrip())
            line = " " * indent + piece
        else:
            line += piece
    lines.append(line)
    return "\n".join(lines)

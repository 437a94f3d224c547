"""Generate the DSL reference page of the documentation site from the code itself.

Every part of the reference comes from the declarations: each argument list from the
dataclass fields (name, type, default) and the class docstring's ``Args:`` (meaning); the
prose, the methods and the runnable example from the docstrings (Google style: ``Args:``,
``Attributes:``, ``Raises:``, ``Example:``); the topic introductions from the module docstrings
and :data:`TOPICS`. Nothing in the page (``docs/pages/reference/dsl.md``) is written by hand,
so it cannot drift from the code: edit the docstrings and regenerate.

    python -m estflow.dsl._reference --check   # exit 1 when the page is out of date
    python -m estflow.dsl._reference --write   # regenerate it

Generation fails, listing every problem, when a name of ``estflow.dsl.__all__`` is in no
topic or has no docstring, when a field has no ``Args:`` entry (or an entry names no field),
when a public method has no docstring, or when a declaration has no doctest ``Example:``.

Stdlib only (``inspect``, ``dataclasses``), like the rest of estflow.dsl.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import importlib
import inspect
import re
import sys
import types
import typing
from pathlib import Path

import estflow.dsl as ef
from estflow.dsl import models

__all__ = ["TOPICS", "Topic", "UndocumentedError", "render", "reference_path", "main"]


@dataclasses.dataclass(frozen=True)
class Topic:
    """A section of the reference: a title, an introduction and the public names it documents.

    ``module`` names a module of estflow.dsl whose docstring prose follows ``intro``.
    """

    title: str
    names: tuple[str, ...]
    intro: str = ""
    module: str | None = None


TOPICS: tuple[Topic, ...] = (
    Topic("Sources", ("CsvSource", "TFRecordSource", "ParquetSource", "BigQuerySource",
                      "SchemaCheck"),
          "Used as `Pipeline.source`.", "sources"),
    Topic("Columns and features", ("Column", "Numeric", "Bucketized", "CategoricalVocab",
                                   "CategoricalHash", "CategoricalIdentity", "Crossed",
                                   "Label", "Derive"),
          "Used in `Pipeline.features`, `Pipeline.label`, `Pipeline.columns` and "
          "`Pipeline.derive`.", "features"),
    Topic("Models", ("DNNClassifier", "DNNRegressor", "LinearClassifier", "LinearRegressor",
                     "DNNLinearCombinedClassifier", "DNNLinearCombinedRegressor",
                     "BaselineClassifier", "BaselineRegressor", "BoostedTreesClassifier",
                     "BoostedTreesRegressor", "Embedding", "Indicator",
                     "CustomModel", "CallableRef", "Candidates"),
          "Used as `Pipeline.model`: a premade model, a `CustomModel` with your own "
          "`model_fn`, or `Candidates` (several, side by side; the best blessed one is "
          "pushed).", "models"),
    Topic("The model_fn contract", ("ModeKeys", "EstimatorSpec"),
          "For a `CustomModel`'s `model_fn`; what its predictions must hold is the "
          "[head output contract](#head-output-contract).", "model_fn"),
    Topic("Split, training and evaluation", ("Split", "TrainSpec", "WarmStart", "EvalSpec",
                                             "Threshold"),
          "`Pipeline.split`, `Pipeline.train` and `Pipeline.eval`: how the data is split, how "
          "long the model trains, how it is evaluated, and the thresholds a model must meet "
          "to be blessed and pushed."),
    Topic("Run configuration and distribution", ("RunConfig", "Cluster"),
          "`Pipeline.run_config`: checkpoints, summaries, the distribution strategy and the "
          "processes training runs as."),
    Topic("Resources and placement", ("Resources", "Accelerator", "Toleration", "SecretEnv",
                                      "SecretVolume", "PvcMount"),
          "Used in `Pipeline.resources`: step name -> `Resources` of that step's Kubeflow "
          "task.", "resources"),
    Topic("Push target", ("PushTarget",),
          "`Pipeline.push`: where a blessed model is pushed (None: no push step)."),
    Topic("Batch prediction", ("BatchPredict",),
          "`Pipeline.predict`: score a table of rows with the pushed model, after push or "
          "alone (a pipeline that only predicts).", "batch"),
    Topic("Data checks and spans", ("DataChecks", "Spans"),
          "`Pipeline.checks`: what each run's data must look like before a model trains on "
          "it; `CsvSource(..., spans=...)`: the source's partitions. See the "
          "[data validation page](../data-validation.md).", "checks"),
    Topic("Your own steps", ("step", "Input", "Output", "UserStep", "When", "blessed",
                             "result", "Artifact", "Examples", "Validation", "Transformed",
                             "TrainedModel", "Evaluation", "Pushed", "Predictions", "Dataset",
                             "ModelDir", "Metrics", "HTML", "Markdown"),
          "`Pipeline.steps`: functions declared as steps of the pipeline's DAG, next to the "
          "built-in ones. See the [own steps page](../own-steps.md).", "steps"),
    Topic("Hyperparameter search", ("Tune", "IntRange", "FloatRange", "Choice", "MedianStop",
                                   "HalvingStop"),
          "`Pipeline.tune`: train the model several times with settings drawn from a space, "
          "and compare the trials by an eval metric.", "tune"),
    Topic("The pipeline", ("Pipeline",), "", "pipeline"),
    Topic("Errors", ("DslError", "DslErrors"), "", "errors"),
)

_HEADER = """\
# estflow.dsl reference

<!-- Generated by `python -m estflow.dsl._reference --write` from the docstrings and dataclass
fields of dsl/*.py: edit those, not this file (tests/dsl/test_reference.py checks it is current). -->

Every public declaration of `estflow.dsl` (`import estflow.dsl as ef`), grouped by topic: its
arguments (name, type, default, meaning) and a runnable example. Declarations are frozen
dataclasses, validated when constructed: a wrong value raises [`DslError`](#dslerror) naming
the field, and `Pipeline` reports every invalid cross-reference at once as
[`DslErrors`](#dslerrors). Declaring a pipeline never imports TensorFlow, Beam or KFP.
"""

_SECTION = re.compile(r"^(Args|Arguments|Attributes|Example|Examples|Raises|Returns):\s*$")
_SECTION_NAMES = {"Args": "Args", "Arguments": "Args", "Attributes": "Attributes",
                  "Example": "Example", "Examples": "Example", "Raises": "Raises",
                  "Returns": "Returns"}
_ARG = re.compile(r"^(\w+(?:\s*/\s*\w+)*)\s*(?:\([^)]*\))?:\s*(.*)$")
_ROLE = re.compile(r":(?:class|data|mod|func|meth|attr|exc):`~?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")


class UndocumentedError(Exception):
    """The code does not document itself well enough to generate the reference."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("cannot generate the DSL reference:\n" +
                         "\n".join(f"  - {p}" for p in self.problems))


@dataclasses.dataclass
class _Doc:
    prose: list[str]
    sections: dict[str, list[str]]


def reference_path() -> Path:
    """Where the page lives in a checkout: ``docs/pages/reference/dsl.md`` (the site's source)."""
    return Path(__file__).resolve().parents[1] / "docs" / "pages" / "reference" / "dsl.md"


def _own_doc(obj) -> str | None:
    """The object's own docstring, cleaned; None when it has none (dataclasses invent one)."""
    doc = obj.__dict__.get("__doc__") if isinstance(obj, type) else getattr(obj, "__doc__", None)
    if not doc or not doc.strip():
        return None
    doc = inspect.cleandoc(doc)
    if isinstance(obj, type) and dataclasses.is_dataclass(obj) and \
            doc.startswith(obj.__name__ + "("):
        return None
    return doc


def _parse(doc: str) -> _Doc:
    """Split a Google-style docstring into prose and its sections (bodies dedented)."""
    out = _Doc([], {})
    current: list[str] | None = None
    for line in doc.splitlines():
        match = _SECTION.match(line)
        if match:
            current = out.sections.setdefault(_SECTION_NAMES[match.group(1)], [])
        elif current is not None and (not line.strip() or line[:1].isspace()):
            current.append(line)
        else:
            current = None
            out.prose.append(line)
    for name, body in out.sections.items():
        text = "\n".join(body).strip("\n")
        lines = text.splitlines()
        indent = min((len(x) - len(x.lstrip()) for x in lines if x.strip()), default=0)
        out.sections[name] = [x[indent:] for x in lines]
    return out


def _entries(body: list[str]) -> dict[str, str]:
    """``name: text`` entries of an Args/Attributes section (``a / b:`` documents both)."""
    entries: dict[str, str] = {}
    names: list[str] = []
    for line in body:
        match = _ARG.match(line) if line[:1].strip() else None
        if match:
            names = [n.strip() for n in match.group(1).split("/")]
            for n in names:
                entries[n] = match.group(2).strip()
        elif line.strip() and names:
            for n in names:
                entries[n] = (entries[n] + " " + line.strip()).strip()
    return entries


def _anchor(title: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return "#" + text.replace(" ", "-")


def _inline(text: str) -> str:
    """reST inline markup of the docstrings as Markdown; public names link to their section."""
    def role(match: re.Match) -> str:
        target = match.group(1)
        name = target.rsplit(".", 1)[-1]
        if name in ef.__all__ and any(name in topic.names for topic in TOPICS):
            return f"[`{name}`]({_anchor(name)})"
        if name in _LINKS:
            return f"[`{name}`]({_LINKS[name]})"
        if match.group(0).startswith(":mod:"):
            return f"`{target}`"
        return f"`{name}`"

    return _LITERAL.sub(r"`\1`", _ROLE.sub(role, text))


def _paragraphs(lines: list[str]) -> str:
    """Prose lines as Markdown paragraphs: wrapped lines joined, ``- `` items kept as a list."""
    blocks: list[str] = []
    current: list[str] = []
    for line in [*lines, ""]:
        stripped = line.strip()
        starts_item = stripped.startswith("- ")
        if not stripped or (starts_item and current):
            if current:
                blocks.append(" ".join(current))
            current = []
        if stripped:
            current.append(stripped)
    text, previous_item = "", False
    for block in blocks:
        item = block.startswith("- ")
        text += ("\n" if item and previous_item else "\n\n") + _inline(block)
        previous_item = item
    return text.strip()


_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def _cell(text: str) -> str:
    """Text as one table cell: a ``|`` escaped outside code spans only. Python-Markdown (the
    site's renderer) never splits a row at a ``|`` inside a code span, and would show the
    backslash of a ``\\|`` there literally."""
    text, out, end = text.replace("\n", " "), [], 0
    for span in _CODE_SPAN.finditer(text):
        out += [text[end:span.start()].replace("|", "\\|"), span.group(0)]
        end = span.end()
    return "".join([*out, text[end:].replace("|", "\\|")])


def _code(text: str) -> str:
    """``text`` as one code span, whatever backticks it holds."""
    fence = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _type(annotation, module) -> str:
    """A field's annotation as written, with the module's union aliases spelled out."""
    text = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)

    def expand(match: re.Match) -> str:
        value = module
        for part in match.group(0).split("."):
            value = getattr(value, part, None)
        args = typing.get_args(value)
        union = typing.get_origin(value) in (typing.Union, types.UnionType)
        if value is None or isinstance(value, type) or not args or not union:
            return match.group(0).rsplit(".", 1)[-1]
        return " | ".join(a.__name__ for a in args)

    return re.sub(r"[A-Za-z_][\w.]*", expand, text)


def _default(value) -> str:
    """The default as Python source: ``Name()`` for a dataclass's own default instance."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        try:
            if value == type(value)():
                return f"{type(value).__name__}()"
        except TypeError:
            pass
    return repr(value)


def _arguments(cls) -> list[tuple[str, str, str, str]]:
    """(name, note, type, default) of each argument of the class's constructor; default is
    Python source, or None for a required argument."""
    module = sys.modules[cls.__module__]
    if dataclasses.is_dataclass(cls):
        rows = []
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            if f.default is not dataclasses.MISSING:
                default = _default(f.default)
            elif f.default_factory is not dataclasses.MISSING:
                default = _default(f.default_factory())
            else:
                default = None
            rows.append((f.name, "", _type(f.type, module), default))
        return rows
    if inspect.isfunction(cls):  # a public function: its parameters
        parameters = list(inspect.signature(cls).parameters.values())
    elif cls.__init__ is object.__init__ or "__init__" not in cls.__dict__:
        return []
    else:
        parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    rows = []
    for p in parameters:
        note = " (keyword-only)" if p.kind is p.KEYWORD_ONLY else ""
        default = None if p.default is p.empty else _default(p.default)
        annotation = "" if p.annotation is p.empty else _type(p.annotation, module)
        rows.append((p.name, note, annotation, default))
    return rows


def _constants(cls) -> list[tuple[str, object]]:
    return [(k, v) for k, v in cls.__dict__.items() if k.isupper() and not callable(v)]


def _members(cls, problems: list[str]) -> list[str]:
    """Bullets of the public methods and properties the class (or an estflow.dsl base) defines."""
    if not isinstance(cls, type):
        return []
    fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    seen: set[str] = set()
    bullets = []
    for base in cls.__mro__:
        if not base.__module__.startswith("estflow.dsl"):
            continue
        for name, member in base.__dict__.items():
            if name.startswith("_") or name in fields or name in seen or name.isupper():
                continue
            seen.add(name)
            if isinstance(member, property):
                func, label = member.fget, f"`{name}` (property)"
            elif isinstance(member, (classmethod, staticmethod)) or inspect.isfunction(member):
                func = member.__func__ if isinstance(member, (classmethod, staticmethod)) \
                    else member
                params = list(inspect.signature(func).parameters.values())
                if not isinstance(member, staticmethod):
                    params = params[1:]
                signature = inspect.Signature([p.replace(annotation=p.empty) for p in params])
                kind = {classmethod: " (classmethod)", staticmethod: " (staticmethod)"}.get(
                    type(member), "")
                label = f"`{name}{signature}`{kind}"
            else:
                continue
            doc = _own_doc(func)
            if doc is None:
                problems.append(f"{cls.__name__}.{name} has no docstring")
                continue
            bullets.append(f"- {label}: {_inline(' '.join(doc.split()))}")
    return bullets


def _example(lines: list[str]) -> str:
    """A doctest as a Python block: the code, each expected output as a ``# ->`` comment."""
    code = []
    for line in lines:
        if line.startswith((">>> ", "... ")) or line in (">>>", "..."):
            code.append(line[4:])
        elif line.strip():
            code.append("# -> " + line.strip())
        else:
            code.append("")
    return "```python\n" + "\n".join(code).strip("\n") + "\n```"


def _head_contract() -> str:
    """The table of :data:`estflow.dsl.models.HEAD_OUTPUTS` (a CustomModel's obligations)."""
    rows = ["| `head` | Prediction key | dtype and shape | Evaluated |", "|---|---|---|---|"]
    for head, outputs in models.HEAD_OUTPUTS.items():
        for key, shape in outputs.items():
            evaluated = "yes" if models.EVALUATED_OUTPUT[head] == key else ""
            rows.append(f"| `{head}` | `{key}` | {_cell(shape)} | {evaluated} |")
    outputs = _paragraphs(_parse(_own_doc_data("HEAD_OUTPUTS")).prose)
    evaluated = _paragraphs(_parse(_own_doc_data("EVALUATED_OUTPUT")).prose)
    return (f"#### Head output contract\n\n`HEAD_OUTPUTS`: {outputs}\n\n"
            f"*Evaluated* (`EVALUATED_OUTPUT`): {evaluated}\n\n" + "\n".join(rows))


def _own_doc_data(name: str) -> str:
    """The docstring written under a module-level constant of :mod:`estflow.dsl.models`."""
    source = inspect.getsource(models)
    match = re.search(rf"^{name}\b.*?\n\"\"\"(.*?)\"\"\"", source, re.S | re.M)
    if not match:
        raise UndocumentedError([f"estflow.dsl.models.{name} has no docstring"])
    return inspect.cleandoc(match.group(1))


def _metric_names() -> str:
    """The table of :data:`estflow.dsl.models.METRIC_NAMES` (what a Threshold may name)."""
    rows = ["| `head` | Metrics | tf.estimator's names also accepted |", "|---|---|---|"]
    for head, names in models.METRIC_NAMES.items():
        aliases = ", ".join(f"`{a}` (`{n}`)" for a, n in models.METRIC_ALIASES[head].items())
        rows.append(f"| `{head}` | {', '.join(f'`{n}`' for n in names)} | {aliases} |")
    names = _paragraphs(_parse(_own_doc_data("METRIC_NAMES")).prose)
    aliases = _paragraphs(_parse(_own_doc_data("METRIC_ALIASES")).prose)
    return (f"#### Metric names\n\n`METRIC_NAMES`: {names}\n\n`METRIC_ALIASES`: {aliases}\n\n"
            + "\n".join(rows))


_EXTRAS = {"CustomModel": _head_contract, "Threshold": _metric_names}
_LINKS = {"HEAD_OUTPUTS": "#head-output-contract", "EVALUATED_OUTPUT": "#head-output-contract",
          "METRIC_NAMES": "#metric-names", "METRIC_ALIASES": "#metric-names"}


def _argument(name: str, argument: tuple[str, str, str, str | None],
              documented: dict[str, str], problems: list[str]) -> str:
    """One argument as a definition-list item: its declaration as Python writes it (``name:
    type = default``, one code span, so a union's ``|`` needs no escaping and the name is never
    squeezed into a narrow table column), then its meaning."""
    arg, note, annotation, default = argument
    meaning = documented.get(arg)
    if meaning is None:
        problems.append(f"{name}: argument `{arg}` is not in the docstring's Args")
        meaning = ""
    declaration = arg + (f": {annotation}" if annotation else "")
    if default is None:
        note += " (required)"
    else:
        declaration += f" = {default}" if annotation else f"={default}"
    return f"{_code(declaration)}{note}\n:   {_inline(meaning) or '&nbsp;'}"


def _section(name: str, problems: list[str]) -> str:
    obj = getattr(ef, name)
    doc = _own_doc(obj)
    if doc is None:
        problems.append(f"{name} has no docstring")
        return f"### {name}\n"
    parsed = _parse(doc)
    parts = [f"### {name}", f"`ef.{name}` (`{obj.__module__}`)", _paragraphs(parsed.prose)]
    documented = _entries(parsed.sections.get("Args", []))
    attributes = _entries(parsed.sections.get("Attributes", []))
    arguments = _arguments(obj)
    if arguments:
        parts.append("Arguments:\n\n" + "\n\n".join(
            _argument(name, argument, documented, problems) for argument in arguments))
    constants = _constants(obj) if not arguments else []
    if constants:
        rows = ["| Constant | Value | Meaning |", "|---|---|---|"]
        for constant, value in constants:
            meaning = attributes.get(constant)
            if meaning is None:
                problems.append(f"{name}: constant `{constant}` is not in the docstring's "
                                "Attributes")
                meaning = ""
            rows.append(f"| `{constant}` | {_cell(_code(repr(value)))} | "
                        f"{_cell(_inline(meaning))} |")
        parts.append("\n".join(rows))
    known = {arg for arg, _, _, _ in arguments}
    for stale in sorted(set(documented) - known):
        problems.append(f"{name}: the docstring's Args documents `{stale}`, which is no "
                        "argument")
    for stale in sorted(set(attributes) - {c for c, _ in constants}) if constants else ():
        problems.append(f"{name}: the docstring's Attributes documents `{stale}`, which is no "
                        "constant")
    members = _members(obj, problems)
    if members:
        parts.append("Methods and properties:\n\n" + "\n".join(members))
    if parsed.sections.get("Raises"):
        raises = _entries(parsed.sections["Raises"])
        parts.append("Raises:\n\n" + "\n".join(
            f"- `{error}`: {_inline(text)}" for error, text in raises.items()))
    if name in _EXTRAS:
        parts.append(_EXTRAS[name]())
    example = parsed.sections.get("Example", [])
    if not any(line.startswith(">>> ") for line in example):
        problems.append(f"{name} has no doctest Example")
    else:
        parts.append("Example:\n\n" + _example(example))
    return "\n\n".join(p for p in parts if p) + "\n"


def _module_prose(module: str) -> str:
    doc = _own_doc(importlib.import_module(f"estflow.dsl.{module}")) or ""
    return _paragraphs(_parse(doc).prose)


def render() -> str:
    """The reference, generated; raises :class:`UndocumentedError` listing what is undocumented."""
    problems: list[str] = []
    placed = [name for topic in TOPICS for name in topic.names]
    for name in sorted(set(ef.__all__) - set(placed)):
        problems.append(f"{name} (estflow.dsl.__all__) is in no topic of "
                        "estflow.dsl._reference.TOPICS")
    for name in sorted(set(placed) - set(ef.__all__)):
        problems.append(f"{name} is in a topic but not in estflow.dsl.__all__")
    for name in sorted({n for n in placed if placed.count(n) > 1}):
        problems.append(f"{name} is in several topics")
    contents = ["## Contents", ""]
    body = []
    for topic in TOPICS:
        names = [n for n in topic.names if n in ef.__all__]
        links = ", ".join(f"[`{n}`]({_anchor(n)})" for n in names)
        contents.append(f"- [{topic.title}]({_anchor(topic.title)}): {links}")
        intro = " ".join(p for p in (_inline(topic.intro),) if p)
        prose = _module_prose(topic.module) if topic.module else ""
        body.append("\n\n".join(p for p in (f"## {topic.title}", intro, prose) if p) + "\n")
        body.extend(_section(name, problems) for name in names)
    if problems:
        raise UndocumentedError(problems)
    return "\n".join([_HEADER, "\n".join(contents) + "\n", *body])


def main(argv: list[str] | None = None) -> int:
    """``--check``: exit 1 (with a diff) when the page is stale; ``--write``: regenerate."""
    parser = argparse.ArgumentParser(prog="python -m estflow.dsl._reference",
                                     description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="fail when the reference page is stale")
    mode.add_argument("--write", action="store_true", help="regenerate the reference page")
    parser.add_argument("--path", type=Path, default=reference_path(),
                        help="the reference file (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        text = render()
    except UndocumentedError as err:
        print(err, file=sys.stderr)
        return 2
    return sync_page(args.path, text, write=args.write, command="python -m estflow.dsl._reference")


def sync_page(path: Path, text: str, *, write: bool, command: str) -> int:
    """Write the generated page ``text`` to ``path`` (``write``), or check that ``path`` holds
    it: exit status 1 with a diff and ``command --write`` when it is stale. The one place a
    generated docs page is written or checked (the DSL and CLI references both use it)."""
    if write:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
        return 0
    current = path.read_text(encoding="utf-8") if path.exists() else ""
    if current == text:
        print(f"{path} is up to date")
        return 0
    diff = difflib.unified_diff(current.splitlines(), text.splitlines(), str(path),
                                "generated", lineterm="", n=1)
    print("\n".join(list(diff)[:80]), file=sys.stderr)
    print(f"{path} is out of date: run {command} --write", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())

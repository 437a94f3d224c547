"""The DSL reference page, docs/pages/reference/dsl.md: every public declaration has a section,
the page is generated from the code (``python -m estflow.dsl._reference --check``), and every
example in it runs without TensorFlow.
"""

from __future__ import annotations

import ast
import dataclasses
import doctest
import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import estflow.dsl as ef
from estflow.dsl import _reference
from estflow.dsl import models

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "docs" / "pages" / "reference" / "dsl.md"
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
_HEAVY = ("tensorflow", "tensorflow_transform", "apache_beam", "kfp", "keras")


def _sections() -> dict[str, str]:
    """``### Name`` heading -> its text, up to the next ``##``/``###`` heading."""
    parts = re.split(r"^(#{2,3} .*)$", REFERENCE.read_text(encoding="utf-8"), flags=re.M)
    return {heading[4:].strip(): text for heading, text in zip(parts[1::2], parts[2::2], strict=True)
            if heading.startswith("### ")}


SECTIONS = _sections()
EXAMPLES = [(name, i, block) for name, text in SECTIONS.items()
            for i, block in enumerate(_BLOCK.findall(text))]


# (a) every public name is documented ---------------------------------------------------------

@pytest.mark.parametrize("name", sorted(ef.__all__))
def test_every_public_name_has_a_section_a_docstring_and_an_example(name):
    assert name in SECTIONS, (f"estflow.dsl.{name} has no '### {name}' section in "
                              f"{REFERENCE}: add it to a topic in estflow.dsl._reference.TOPICS "
                              "and run python -m estflow.dsl._reference --write")
    assert _reference._own_doc(getattr(ef, name)), f"estflow.dsl.{name} has no docstring"
    assert _BLOCK.search(SECTIONS[name]), f"the {name} section has no python example"


def test_the_reference_documents_nothing_that_is_not_public():
    assert set(SECTIONS) == set(ef.__all__)


def test_generation_refuses_an_undocumented_public_name(monkeypatch):
    @dataclasses.dataclass(frozen=True)
    class Thin:
        """A declaration whose docstring misses an argument and an example.

        Args:
            size: documented.
            colour: no such field.
        """

        size: int = 1
        weight: float = 0.0

    class Bare:
        pass

    monkeypatch.setattr(ef, "Thin", Thin, raising=False)
    monkeypatch.setattr(ef, "Bare", Bare, raising=False)
    monkeypatch.setattr(ef, "Orphan", Bare, raising=False)
    monkeypatch.setattr(ef, "__all__", [*ef.__all__, "Thin", "Bare", "Orphan"])
    monkeypatch.setattr(_reference, "TOPICS", (
        *_reference.TOPICS, _reference.Topic("Extra", ("Thin", "Bare"))))
    with pytest.raises(_reference.UndocumentedError) as caught:
        _reference.render()
    problems = "\n".join(caught.value.problems)
    assert "Orphan (estflow.dsl.__all__) is in no topic" in problems
    assert "Bare has no docstring" in problems
    assert "Thin: argument `weight` is not in the docstring's Args" in problems
    assert "Thin: the docstring's Args documents `colour`, which is no argument" in problems
    assert "Thin has no doctest Example" in problems


# (b) the file is generated from the code -------------------------------------------------------

def test_the_reference_is_up_to_date():
    assert _reference.render() == REFERENCE.read_text(encoding="utf-8"), (
        "docs/pages/reference/dsl.md is out of date: run python -m estflow.dsl._reference --write")


def test_check_mode_as_a_command(tmp_path):
    command = [sys.executable, "-m", "estflow.dsl._reference", "--check"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr

    stale = tmp_path / "dsl.md"
    text = REFERENCE.read_text(encoding="utf-8")
    assert "`max_rejected_fraction: float = 0.01`" in text
    stale.write_text(text.replace("`max_rejected_fraction: float = 0.01`",
                                  "`max_rejected_fraction: float = 0.02`"), encoding="utf-8")
    assert _reference.main(["--check", "--path", str(stale)]) == 1
    assert _reference.main(["--write", "--path", str(stale)]) == 0
    assert _reference.main(["--check", "--path", str(stale)]) == 0


def test_argument_lists_follow_the_dataclass_fields():
    for name in ef.__all__:
        cls = getattr(ef, name)
        if dataclasses.is_dataclass(cls):
            listed = SECTIONS[name].split("Arguments:\n\n", 1)[1]
            terms = re.findall(r"^`(\w+)(?::|`).*\n:   ", listed, flags=re.M)
            assert terms == [f.name for f in dataclasses.fields(cls) if f.init], name


def test_arguments_are_declarations_as_python_writes_them():
    """``name: type = default`` in one code span: a union's ``|`` is written as it is (no
    ``\\|``, which a table cell's code span shows literally), and no table squeezes the name."""
    text = REFERENCE.read_text(encoding="utf-8")
    assert "\\|" not in "".join(re.findall(r"`[^`\n]*`", text))
    assert "| Argument |" not in text
    csv = SECTIONS["CsvSource"]
    assert "`path: str` (required)\n:   a file path or a glob" in csv
    assert "`schema_check: SchemaCheck | None = None`\n:   " in csv


def test_a_pipe_is_escaped_only_outside_code_spans():
    assert _reference._cell("`a | b` or c | d") == "`a | b` or c \\| d"
    assert _reference._code("x`y") == "``x`y``"


def test_the_docstring_examples_hold():
    """The reference's examples are the docstrings' doctests: their shown outputs are right."""
    failed = {}
    for info in pkgutil.iter_modules(ef.__path__):
        module = importlib.import_module(f"estflow.dsl.{info.name}")
        result = doctest.testmod(module, verbose=False, report=False)
        if result.failed:
            failed[info.name] = result.failed
    assert not failed


def _source_tuples(function: ast.FunctionDef) -> list[tuple[str, ...]]:
    tuples = []
    for node in ast.walk(function):
        if isinstance(node, ast.Tuple) and node.elts and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            tuples.append((node.lineno, node.col_offset, tuple(e.value for e in node.elts)))
    return [t for _, _, t in sorted(tuples)]


def _find_in_components(match) -> list:
    found = []
    for path in sorted((REPO / "components").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [node for node in ast.walk(tree) if match(node)]
    return found


def test_the_head_output_contract_matches_the_premade_models_and_the_evaluate_step():
    """HEAD_OUTPUTS (documented in the reference) against the components' source, read as text
    (the dsl tests import no TensorFlow)."""
    functions = _find_in_components(
        lambda n: isinstance(n, ast.FunctionDef) and n.name == "_prediction_keys")
    assert len(functions) == 1, ("the premade models' _prediction_keys was not found under "
                                 "components/: update this test to where they are defined")
    keys = _source_tuples(functions[0])[:3]
    assert keys == [tuple(models.HEAD_OUTPUTS[h]) for h in models.HEADS]

    assignments = _find_in_components(
        lambda n: isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_HEAD_OUTPUT" for t in n.targets))
    assert len(assignments) == 1, ("the evaluate step's _HEAD_OUTPUT was not found under "
                                   "components/: update this test to where it is defined")
    assert ast.literal_eval(assignments[0].value) == models.EVALUATED_OUTPUT
    for head, key in models.EVALUATED_OUTPUT.items():
        assert key in models.HEAD_OUTPUTS[head]
    assert "#### Head output contract" in SECTIONS["CustomModel"]


# (c) every example runs, without TensorFlow ---------------------------------------------------

def _run(block: str) -> tuple[dict, object]:
    """Exec a block in a fresh namespace; returns it and the value of a final expression."""
    tree = ast.parse(block)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    namespace: dict = {"__name__": "reference_example"}
    exec(compile(tree, "dsl.md", "exec"), namespace)  # noqa: S102
    value = None
    if last is not None:
        value = eval(compile(ast.Expression(last.value), "dsl.md", "eval"),  # noqa: S307
                     namespace)
    return namespace, value


def test_every_section_has_one_example():
    assert sorted(name for name, _, _ in EXAMPLES) == sorted(ef.__all__)


@pytest.mark.parametrize("name, index, block", EXAMPLES,
                         ids=[f"{name}-{i}" for name, i, _ in EXAMPLES])
def test_example_runs_and_declares_its_object(name, index, block):
    namespace, value = _run(block)
    declared = getattr(ef, name)
    if name == "ModeKeys":  # a namespace of constants, never instantiated
        assert "ef.ModeKeys." in block and value == (ef.ModeKeys.PREDICT, True)
        return
    if not dataclasses.is_dataclass(declared) and (
            inspect.isfunction(declared) or name in ("Input", "Output")
            or issubclass(declared, ef.Artifact)):
        # a function, an annotation or an artifact kind: declares nothing itself; its example
        # uses it (and ran)
        assert f"ef.{name}" in block, f"the {name} example does not use ef.{name}"
        return
    made = [v for v in [*namespace.values(), value] if isinstance(v, declared)]
    assert made, f"the {name} example declares no {name}"


def test_the_examples_import_no_tensorflow_beam_or_kfp(tmp_path):
    script = "\n".join(
        ["import sys"] +
        [f"exec(compile({block!r}, 'dsl.md:{name}', 'exec'), {{'__name__': 'ex'}})"
         for name, _, block in EXAMPLES] +
        [f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {set(_HEAVY)!r})",
         "print(heavy)"])
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"

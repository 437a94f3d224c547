"""The digest of a user function (components/_io/user_code.py ``code_fingerprint``): its
source and its helpers' (in its file and in the user's modules next to it), never the file's
name, path or module name. Read with ``ast``; nothing of the user's is imported."""

from __future__ import annotations

import tempfile
import textwrap
from pathlib import Path

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from estflow.components._io import user_code as facts
from estflow.dsl.refs import CallableRef

# small generated function bodies: arithmetic over the argument and constants
_TERMS = st.sampled_from(["x", "1", "2.5", "x * x", "abs(x)", "FACTOR"])
_OPS = st.sampled_from(["+", "-", "*"])
NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True).filter(
    lambda n: n not in {"derive", "scale", "unrelated", "helpers", "if", "in", "is", "or",
                        "as", "def", "for", "and", "not", "del", "try", "with"})


def _bodies_expr(terms: list[str], ops: list[str]) -> str:
    return " ".join(t if i == len(terms) - 1 else f"{t} {ops[i]}" for i, t in enumerate(terms))


EXPRS = st.builds(_bodies_expr, st.lists(_TERMS, min_size=1, max_size=4),
                  st.lists(_OPS, min_size=3, max_size=3))


def _pipeline_file(derive: str, unrelated: str) -> str:
    return textwrap.dedent(f"""\
        import math

        FACTOR = 0.2


        def derive(x):
            return {derive}


        def unrelated(x):
            return {unrelated}
        """)


def _digest(folder: Path, file_name: str, module: str, text: str,
            name: str = "derive") -> str:
    path = folder / file_name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return facts.code_fingerprint(CallableRef(module, name, file=str(path)))


@settings(max_examples=40, deadline=None)
@given(body=EXPRS, other=EXPRS, names=st.tuples(NAMES, NAMES, NAMES, NAMES))
def test_the_same_function_anywhere_has_the_same_digest(body, other, names):
    """Another file name, directory and module name (a `cp`, another checkout, a CI
    workspace), and any unrelated function beside it: the same digest."""
    file_a, file_b, folder, module = names
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        first = _digest(root / "a", f"{file_a}.py", f"estflow_user_{file_a}",
                        _pipeline_file(body, "x"))
        second = _digest(root / folder / "deeper", f"{file_b}_copy.py", module,
                         _pipeline_file(body, other))
    assert first == second


@settings(max_examples=40, deadline=None)
@given(body=EXPRS, edited=EXPRS)
def test_a_changed_body_changes_the_digest(body, edited):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        first = _digest(root, "p.py", "p", _pipeline_file(body, "x"))
        second = _digest(root, "p.py", "p", _pipeline_file(edited, "x"))
    assert (first == second) == (body == edited)


def _with_helper(root: Path, scale: str, unrelated: str, style: str) -> str:
    """A pipeline whose derive function calls ``scale`` of the user's module
    ``my_features.py`` next to it (imported ``style``: by name, or the module)."""
    (root / "my_features.py").write_text(textwrap.dedent(f"""\
        OFFSET = 3


        def scale(x):
            return {scale}


        def unrelated(x):
            return {unrelated}
        """))
    if style == "from":
        text = "from my_features import scale\n\ndef derive(x):\n    return scale(x) + 1\n"
    else:
        text = "import my_features as mf\n\ndef derive(x):\n    return mf.scale(x) + 1\n"
    return _digest(root, "pipeline.py", "estflow_user_pipeline", text)


@settings(max_examples=30, deadline=None)
@given(scale=EXPRS, edited=EXPRS, other=EXPRS, style=st.sampled_from(["from", "module"]))
def test_a_helper_in_a_sibling_module_is_part_of_the_digest(scale, edited, other, style):
    with tempfile.TemporaryDirectory() as tmp:
        first, second, moved = Path(tmp, "a"), Path(tmp, "b"), Path(tmp, "c", "d")
        for folder in (first, second, moved):
            folder.mkdir(parents=True)
        before = _with_helper(first, scale, "x", style)
        after = _with_helper(second, edited, "x", style)
        unrelated = _with_helper(moved, scale, other, style)
    assert (before == after) == (scale == edited)  # the helper's body is read
    assert unrelated == before  # another function of the helper module is not


def test_a_helper_s_module_level_names_and_a_package_s_relative_import_are_followed(tmp_path):
    package = tmp_path / "proj"
    package.mkdir()
    (package / "__init__.py").write_text("")

    def write(offset: int) -> str:
        (package / "features.py").write_text(
            f"OFFSET = {offset}\n\ndef scale(x):\n    return x + OFFSET\n")
        text = "from .features import scale\n\ndef derive(x):\n    return scale(x)\n"
        return _digest(package, "pipeline.py", "proj.pipeline", text)

    assert write(1) != write(2)  # a constant the helper uses
    assert write(1) == write(1)


def test_a_submodule_of_a_user_package_is_followed(tmp_path):
    (tmp_path / "feats").mkdir()
    (tmp_path / "feats" / "__init__.py").write_text("")
    text = "import feats.scaling\n\ndef derive(x):\n    return feats.scaling.scale(x)\n"

    def write(factor: int) -> str:
        (tmp_path / "feats" / "scaling.py").write_text(f"def scale(x):\n    return x * {factor}\n")
        return _digest(tmp_path, "p.py", "p", text)

    assert write(2) != write(3)


def test_an_installed_module_is_keyed_by_its_import_not_its_files(tmp_path):
    text = "import json\n\ndef derive(x):\n    return json.dumps(x)\n"
    first = _digest(tmp_path, "p.py", "p", text)
    assert _digest(tmp_path, "p.py", "p", text.replace("import json",
                                                       "import json as json")) != first


def test_the_parts_name_each_definition_read():
    parts = facts.code_parts(CallableRef("estflow.pipelines.examples.taxi", "big_tipper"))
    assert set(parts) == {"big_tipper"}

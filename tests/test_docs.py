"""The documentation's Python examples run as written, and the README stays short.

Every ```python block of the Estimator API page (docs/pages/estimator.md) that is estflow code
(not the tf.estimator 2.15 "before" listings, which need TF <= 2.15) runs in a fresh
interpreter; the top README's declaration example is built (it must be a valid pipeline), and
its import line imports. The compat corpus's README states how many programs pass, and that
figure is the corpus's.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _blocks(path: Path) -> list[str]:
    return _BLOCK.findall(path.read_text(encoding="utf-8"))


def _code(block: str) -> str:
    """The block without comments (a "# was: tf.estimator" note is not tf.estimator code)."""
    return "\n".join(line.split("#", 1)[0] for line in block.splitlines())


def _is_original(block: str) -> bool:
    code = _code(block)
    return "tf.estimator" in code or "tf.feature_column" in code


ENGINE_README = REPO / "docs" / "pages" / "estimator.md"
ENGINE_EXAMPLES = [b for b in _blocks(ENGINE_README) if not _is_original(b)]


def test_the_engine_page_has_examples_and_originals():
    blocks = _blocks(ENGINE_README)
    assert len(ENGINE_EXAMPLES) >= 2
    assert any(_is_original(b) for b in blocks)  # the porting guide shows the original


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(ENGINE_EXAMPLES)))
def test_engine_page_example_runs(index, tmp_path):
    script = tmp_path / f"example_{index}.py"
    script.write_text(ENGINE_EXAMPLES[index], encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, env={"TF_CPP_MIN_LOG_LEVEL": "2",
                                                       "PATH": "/usr/bin:/bin",
                                                       "HOME": str(tmp_path)})
    assert done.returncode == 0, (f"estimator.md example {index} failed:\n"
                                  f"{ENGINE_EXAMPLES[index]}\n{done.stderr[-3000:]}")


def test_top_readme_declaration_is_a_valid_pipeline():
    import estflow.dsl as ef

    blocks = _blocks(REPO / "README.md")
    declaration = next(b for b in blocks if "ef.Pipeline(" in b)
    namespace: dict = {"__file__": str(REPO / "pipelines" / "examples" / "taxi.py"),
                       "__name__": "readme_example"}
    exec(compile(declaration, "README.md", "exec"), namespace)  # noqa: S102
    pipeline = namespace["pipeline"]
    assert isinstance(pipeline, ef.Pipeline)
    assert pipeline.label.name == "big_tipper"
    imports = next(b for b in blocks if b.lstrip().startswith("from estflow.estimator"))
    exec(compile(imports, "README.md", "exec"), {})  # noqa: S102


README_LIMIT = 10_240  # bytes: a short README; the documentation site holds the rest


def test_the_readme_is_short():
    size = len((REPO / "README.md").read_bytes())
    assert size < README_LIMIT, (f"README.md is {size} bytes, expected under {README_LIMIT}: "
                                 "move details to a page under docs/pages/")


def test_the_compat_readme_states_the_corpus_figure():
    from tests.compat import test_corpus

    programs = sorted((REPO / "tests" / "compat" / "programs").glob("*.py"))
    passing = len(programs) - len(test_corpus.XFAIL)
    text = (REPO / "tests" / "compat" / "README.md").read_text(encoding="utf-8")
    stated = re.findall(r"\*\*Now: (\d+) of (\d+) programs", text)
    assert stated == [(str(passing), str(len(programs)))], (
        f"tests/compat/README.md states {stated}; the corpus has {len(programs)} programs, "
        f"{passing} expected to pass (tests/compat/test_corpus.py XFAIL: "
        f"{sorted(test_corpus.XFAIL)})")
    for name in test_corpus.XFAIL:
        assert f"`{name}`" in text and "xfail" in text, f"{name}: its xfail is not in the README"

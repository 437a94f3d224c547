"""The CLI reference page, docs/pages/reference/cli.md: generated from the ``estflow`` parsers
(``python -m estflow.pipelines.cli.reference --check``), so every command and option is there
with its help, and a stale page fails."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from estflow.pipelines.cli import build_parser
from estflow.pipelines.cli import reference

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "pages" / "reference" / "cli.md"


def _parsers(parser: argparse.ArgumentParser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_the_page_is_up_to_date():
    assert reference.render() == PAGE.read_text(encoding="utf-8"), (
        "docs/pages/reference/cli.md is out of date: run "
        "python -m estflow.pipelines.cli.reference --write")


def test_every_command_and_option_has_its_place():
    text = PAGE.read_text(encoding="utf-8")
    parsers = list(_parsers(build_parser()))
    assert len(parsers) > 10
    for parser in parsers:
        assert f"# {parser.prog}\n" in text, f"no section for {parser.prog}"
        for action in parser._actions:
            for option in action.option_strings:
                assert f"`{option}" in text, f"{parser.prog} {option} is not on the page"


def test_check_mode_as_a_command(tmp_path):
    command = [sys.executable, "-m", "estflow.pipelines.cli.reference", "--check"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr

    stale = tmp_path / "cli.md"
    stale.write_text(PAGE.read_text(encoding="utf-8").replace("`--workers N`", "`--worker N`"),
                     encoding="utf-8")
    assert reference.main(["--check", "--path", str(stale)]) == 1
    assert reference.main(["--write", "--path", str(stale)]) == 0
    assert reference.main(["--check", "--path", str(stale)]) == 0

"""The docs lane: its harness on small pages (tests/docs/fixtures/), then README.md and the docs
site run as a user follows them.

The fixture pages exercise each lane marker; those named ``wrong_*`` hold a mistake a page can
make (a command that fails, an output or exit status that is not what happens, a line the CLI
refuses, a server that does not start) and the harness must report it with the page, block,
line and command. The background-server fixture runs Python's own ``http.server`` on a free
loopback port, started and stopped by the harness.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.docs import lane
from tests.docs import pages

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _pages(tmp: Path, *names: str) -> list[Path]:
    """Fixture pages copied into ``tmp``, each ``@PORT@`` a free port of its own."""
    copies = []
    for name in names:
        copy = tmp / name
        copy.write_text((FIXTURES / name).read_text().replace("@PORT@", str(_free_port())))
        copies.append(copy)
    return copies


def _answers(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_blocks_and_markers_are_parsed(tmp_path):
    page = pages.parse_page(_pages(tmp_path, "passing.md")[0], "passing.md")
    found = [(block.lang, block.marker, block.arg) for block in page.blocks]
    assert found[:6] == [("bash", "", ""), ("text", "output", ""), ("bash", "", ""),
                         ("text", "output", ""), ("console", "", ""), ("bash", "exit", "3")]
    assert ("bash", "skip", "needs a GPU, which this page pretends to need") in found
    assert {marker for _, marker, _ in found} == set(pages.MARKERS) | {""}
    console = page.blocks[4]
    assert console.line == 34
    assert pages.commands(console) == [
        pages.Command(35, "echo ready", ("ready",)),
        pages.Command(37, "test -f README.md        # the workspace holds the repository's files")]
    assert pages.problems(page) == []


def test_commands_go_on_over_continuations_and_open_quotes():
    block = pages.Block("p.md", 1, 10, "bash", "# a comment\nestflow run \\\n  x.py\n"
                        "curl -d '{\"a\":\n 1}' url\n\necho done\n")
    assert [(cmd.line, cmd.text.split()[0]) for cmd in pages.commands(block)] == [
        (12, "estflow"), (14, "curl"), (17, "echo")]


def test_what_the_lane_cannot_run_is_a_problem_of_the_page():
    found = pages.problems(pages.parse_page(FIXTURES / "bad_markers.md", "bad_markers.md"))
    assert found == [
        "bad_markers.md:27: a lane marker not on the line right before a fence",
        "bad_markers.md block 1 (line 4): unknown lane marker 'sometimes' (expected one of "
        "cluster, background, exit, output, skip, python-fragment)",
        "bad_markers.md block 2 (line 9): `lane: skip` needs a reason",
        "bad_markers.md block 3 (line 13): ```sh is not run by the lane: write ```bash, "
        "```console or ```python, or mark it",
        "bad_markers.md block 4 (line 18): `lane: exit N` needs a status number, got 'three'",
        "bad_markers.md block 5 (line 23): `lane: background` block names no port (--port N)",
    ]


def test_the_lane_refuses_pages_with_problems_before_running_anything(tmp_path):
    with pytest.raises(ValueError, match="unknown lane marker 'sometimes'"):
        lane.run_lane(REPO, [FIXTURES / "bad_markers.md"], tmp_path)
    assert not (tmp_path / "workspace").exists()


def test_a_page_that_is_right_passes_and_its_server_is_stopped(tmp_path):
    page, = _pages(tmp_path, "passing.md")
    blocks = pages.parse_page(page, "passing.md").blocks
    port = next(pages.port(b.text) for b in blocks if b.marker == "background")
    failures, ran = lane.run_lane(REPO, [page], tmp_path / "lane")
    assert failures == []
    assert len(ran.walls) == len(blocks)  # every block was visited
    assert not _answers(port)


@pytest.fixture(scope="module")
def wrong(tmp_path_factory) -> dict[str, lane.Failure]:
    """The failure of each ``wrong_*`` fixture page, all run in one lane (a failing page
    stops; the next page still runs)."""
    tmp = tmp_path_factory.mktemp("wrong")
    names = sorted(path.name for path in FIXTURES.glob("wrong_*.md"))
    failures, _ = lane.run_lane(REPO, _pages(tmp, *names), tmp / "lane")
    return {failure.block.page: failure for failure in failures}


def test_every_wrong_page_is_reported(wrong):
    assert sorted(wrong) == sorted(path.name for path in FIXTURES.glob("wrong_*.md"))


def test_a_failing_command_is_reported_with_page_line_status_and_output(wrong):
    text = str(wrong["wrong_command.md"])
    assert text.startswith("wrong_command.md:5 (block 1): `ls no-such-file-in-the-repository`: "
                           "failed (exit status 2)")
    assert "No such file or directory" in text


def test_an_output_mismatch_names_the_missing_line(wrong):
    failure = wrong["wrong_output.md"]
    assert (failure.block.index, failure.line) == (2, 10)
    assert "lacks the line(s):\n  nothing pushed" in str(failure)
    assert "pushed version ..." not in str(failure).split("\n    |")[0]  # that one matched


def test_a_console_transcript_is_checked(wrong):
    text = str(wrong["wrong_console.md"])
    assert text.startswith('wrong_console.md:4 (block 1): `echo "3 runs"`: its output lacks')
    assert "  4 runs" in text


def test_exit_n_is_honoured(wrong):
    assert str(wrong["wrong_exit.md"]).startswith(
        "wrong_exit.md:5 (block 1): `true`: exit status 3 expected (exit status 0)")
    assert str(wrong["wrong_exit_early.md"]).startswith(
        "wrong_exit_early.md:5 (block 1): `false`: exit status 1 expected (exit status 1)")


def test_a_cluster_line_the_cli_refuses_is_reported(wrong):
    text = str(wrong["wrong_cluster.md"])
    assert text.startswith("wrong_cluster.md:6 (block 1): `estflow submit taxi.yaml --hots "
                           "http://KFP_HOST`: the CLI's parser refuses it (exit status 2)")
    assert "unrecognized arguments: --hots http://KFP_HOST" in text


def test_a_failing_python_block_names_the_line_that_raised(wrong):
    text = str(wrong["wrong_python.md"])
    assert text.startswith("wrong_python.md:6 (block 1): `python (the block as a script)`: "
                           "failed (exit status 1)")
    assert "normalize" in text


def test_a_server_that_does_not_start_is_reported(wrong):
    assert str(wrong["wrong_server.md"]).startswith(
        "wrong_server.md:5 (block 1): `python -c 'raise SystemExit(4)'  --port ")
    assert "the server exited before port" in str(wrong["wrong_server.md"])


def test_every_block_of_the_docs_runs_or_says_why_not():
    """README.md and every page of the site: no block the lane would silently pass over, no
    skip without its reason, no page the nav leaves out."""
    found = [f"{path.relative_to(REPO)}: in the nav of docs/mkdocs.yml, but no such page"
             for path in pages.doc_pages(REPO) if not path.exists()]
    for path in filter(Path.exists, pages.doc_pages(REPO)):
        found += pages.problems(pages.parse_page(path, str(path.relative_to(REPO))))
    site = REPO / "docs" / "mkdocs.yml"
    if site.exists():
        listed = set(pages.site_pages(site))
        found += [f"{path.relative_to(REPO)}: not in the nav of docs/mkdocs.yml (the lane would "
                  "not run it)" for path in sorted(pages.site_config(site)[1].rglob("*.md"))
                  if path not in listed]
    assert found == []


@pytest.mark.slow
def test_the_docs_run_as_written(tmp_path):
    """README.md, then the site's pages in nav order, every block, in one fresh workspace."""
    failures, ran = lane.run_lane(REPO, pages.doc_pages(REPO), tmp_path)
    slowest = sorted(ran.walls, key=lambda wall: -wall[1])[:8]
    print("slowest blocks:\n" + "\n".join(f"  {s:6.1f} s  {where}" for where, s in slowest))
    assert failures == [], "\n\n".join(map(str, failures))

"""The documentation site builds with ``mkdocs build --strict``: no broken link, anchor or nav
entry, no page left out of the nav, and no other warning. The built site reads from disk (every
link names a file), code keeps its lines, the generated references render every type as
written, and the home page's table points at every page of the nav."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote
from urllib.parse import urlparse

import pytest

from tests.docs.pages import site_config
from tests.docs.pages import site_pages

REPO = Path(__file__).resolve().parents[2]
MKDOCS_YML = REPO / "docs" / "mkdocs.yml"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    tmp_path = tmp_path_factory.mktemp("docs")
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(MKDOCS_YML),
               "-d", str(tmp_path / "site")]
    # NO_MKDOCS_2_WARNING: Material 9.7+ prints a banner about MkDocs 2 on every build.
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=env)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-5000:]
    warnings = [line for line in output.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert not warnings, "\n".join(warnings)
    return tmp_path / "site"


def test_the_site_builds_strict_without_a_warning(site):
    assert (site / "index.html").exists()
    assert (site / "reference" / "dsl.html").exists()


def test_a_site_opened_from_disk_links_to_files(site):
    """file:// serves no directory index: every link between pages names an .html file that
    the build wrote (docs/site/index.html opened in a browser navigates everywhere)."""
    # 404.html is a server's page (its links are site-absolute), never opened from disk.
    pages = sorted(p for p in site.rglob("*.html") if p.name != "404.html")
    assert len(pages) > 10
    broken = []
    for page in pages:
        for href in re.findall(r'href="([^"]+)"', page.read_text(encoding="utf-8")):
            url = urlparse(html.unescape(href))
            if url.scheme or url.netloc or not url.path:
                continue
            target = (page.parent / unquote(url.path)).resolve()
            if target.is_dir() or not target.exists():
                broken.append(f"{page.relative_to(site)}: {href}")
    assert not broken, "\n".join(sorted(set(broken))[:40])


def test_the_site_loads_nothing_from_the_web(site):
    loads = re.compile(r'<(?:link|script)[^>]*(?:href|src)="(https?:)?//[^"]*"')
    found = [f"{page.relative_to(site)}: {m.group(0)}" for page in site.rglob("*.html")
             for m in loads.finditer(page.read_text(encoding="utf-8"))]
    assert not found, "\n".join(found[:10])


def test_no_literal_backslash_pipe_in_rendered_code(site):
    """A union type (``SchemaCheck | None``) renders as written, not as ``SchemaCheck \\| None``
    (a table cell's escaped pipe inside a code span shows its backslash)."""
    found = [f"{page.relative_to(site)}: {m.group(0)}" for page in site.rglob("*.html")
             for m in re.finditer(r"<code>[^<]*\\\|[^<]*</code>",
                                  page.read_text(encoding="utf-8"))]
    assert not found, f"{len(found)} code spans with a literal \\|:\n" + "\n".join(found[:10])
    reference = (site / "reference" / "dsl.html").read_text(encoding="utf-8")
    assert "<code>schema_check: SchemaCheck | None = None</code>" in reference


def test_argument_names_are_not_squeezed_into_a_table_column(site):
    """The DSL reference lists arguments as definition terms (full width), not as the first
    column of a four-column table, where the theme broke long names mid-word."""
    reference = (site / "reference" / "dsl.html").read_text(encoding="utf-8")
    assert "<th>Argument</th>" not in reference
    assert "<dt><code>max_rejected_fraction: float = 0.01</code></dt>" in reference


def test_code_blocks_scroll_in_a_wider_column(site):
    config, docs_dir = site_config(MKDOCS_YML)
    sheets = config.get("extra_css") or []
    assert sheets, "docs/mkdocs.yml has no extra_css"
    css = "\n".join((docs_dir / sheet).read_text(encoding="utf-8") for sheet in sheets)
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    rules = dict((sel.strip(), body) for sel, body in re.findall(r"([^{}]+)\{([^}]*)\}", css))
    pre = [body for sel, body in rules.items() if re.search(r"\bpre\b", sel)]
    assert any("white-space: pre;" in b and "overflow-x: auto" in b for b in pre), rules
    grid = rules.get(".md-grid", "")
    width = re.search(r"max-width:\s*([\d.]+)rem", grid)
    assert width and float(width.group(1)) > 61, grid  # the theme's own is 61rem
    for sheet in sheets:
        assert (site / sheet).exists()


def _home_links() -> set[str]:
    text = (REPO / "docs" / "pages" / "index.md").read_text(encoding="utf-8")
    table = "\n".join(line for line in text.splitlines() if line.startswith("|"))
    return {link.split("#")[0] for link in re.findall(r"\]\(([^)\s]+)\)", table)}


def test_the_home_page_table_lists_every_page_of_the_nav():
    docs_dir = MKDOCS_YML.parent / "pages"
    nav = {page.relative_to(docs_dir).as_posix() for page in site_pages(MKDOCS_YML)}
    nav.discard("index.md")
    links = _home_links()
    assert not nav - links, f"index.md's table omits {sorted(nav - links)}"
    assert not links - nav, f"index.md's table links to pages not in the nav: {links - nav}"

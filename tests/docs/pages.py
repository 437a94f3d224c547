"""The pages the docs lane runs: fenced blocks with their lane markers, commands, and the
site's pages in nav order (the convention is in :mod:`tests.docs.lane`)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

RUN_LANGS = ("bash", "console", "python")
# Info strings a reader runs but the lane does not: a block with one must be retyped or marked.
RUNNABLE_ALIASES = ("sh", "shell", "zsh", "shell-session", "shellsession", "bash-session",
                    "terminal", "py", "python3", "pycon", "ipython")
MARKERS = ("cluster", "background", "exit", "output", "skip", "python-fragment")

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[^\s`{]*)")
_MARKER = re.compile(r"^\s*<!--\s*lane:\s*(?P<name>\S+)\s*(?P<arg>.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """A fenced block of a page: ``index`` counts every fence of the page from 1, ``line`` is
    the line of its opening fence."""

    page: str
    index: int
    line: int
    lang: str
    text: str
    marker: str = ""
    arg: str = ""

    def where(self) -> str:
        return f"{self.page} block {self.index} (line {self.line})"


@dataclass(frozen=True)
class Command:
    """One command of a shell block: where it starts in the page, its text, and (console) the
    lines shown as its output."""

    line: int
    text: str
    expected: tuple[str, ...] = ()


@dataclass
class Page:
    name: str
    blocks: list[Block]
    problems: list[str] = field(default_factory=list)




def parse_page(path: Path, name: str) -> Page:
    """The page's fenced blocks with their markers; a marker not right before a fence is a
    problem of the page."""
    lines = path.read_text(encoding="utf-8").splitlines()
    page, i, skipped = Page(name, []), 0, set()  # skipped: markers used, lines in blocks
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        end = _closing(lines, i, opening)
        marker = _MARKER.match(lines[i - 1]) if i else None
        skipped.update(range(i - 1 if marker else i, end + 1))
        page.blocks.append(Block(name, len(page.blocks) + 1, i + 1, opening["lang"].lower(),
                                 _dedent(lines[i + 1:end], len(opening["indent"])),
                                 marker["name"] if marker else "", marker["arg"] if marker else ""))
        i = end + 1
    page.problems += [f"{name}:{n + 1}: a lane marker not on the line right before a fence"
                      for n, text in enumerate(lines) if _MARKER.match(text) and n not in skipped]
    return page


def _closing(lines: list[str], start: int, opening: re.Match) -> int:
    fence = opening["fence"]
    for n in range(start + 1, len(lines)):
        text = lines[n].strip()
        if text.startswith(fence[0] * len(fence)) and not text.strip(fence[0]):
            return n
    return len(lines)


def _dedent(lines: list[str], indent: int) -> str:
    # A block in a list item is indented as a whole; a line indented less is only stripped.
    return "\n".join(text[indent:] if not text[:indent].strip() else text.lstrip()
                      for text in lines) + "\n"


def problems(page: Page) -> list[str]:
    """What the lane cannot run as the page means: unknown or incomplete markers, blocks a
    reader runs that the lane would silently pass over."""
    found = list(page.problems)
    for block in page.blocks:
        found += [f"{block.where()}: {p}" for p in _block_problems(block)]
    return found


def _block_problems(block: Block) -> list[str]:
    if block.marker and block.marker not in MARKERS:
        return [f"unknown lane marker {block.marker!r} (expected one of {', '.join(MARKERS)})"]
    if block.marker == "skip" and not block.arg:
        return ["`lane: skip` needs a reason"]
    if block.marker == "exit" and not block.arg.isdigit():
        return [f"`lane: exit N` needs a status number, got {block.arg!r}"]
    if block.marker == "output" and block.index == 1:
        return ["`lane: output` on a page's first block: no block before it"]
    if block.marker == "background" and port(block.text) is None:
        return ["`lane: background` block names no port (--port N)"]
    if block.lang in RUNNABLE_ALIASES and not block.marker:
        return [f"```{block.lang} is not run by the lane: write ```bash, ```console or "
                "```python, or mark it"]
    return []


def commands(block: Block) -> list[Command]:
    """The block's commands: a command goes on while its line ends with a backslash or a quote
    is open; in a console block only ``$ `` lines start one, the other lines are its output."""
    found: list[Command] = []
    start, text = 0, ""
    for n, raw in enumerate(block.text.splitlines(), start=block.line + 1):
        if text:
            text += "\n" + raw
        elif block.lang != "console" or raw.startswith("$ "):
            start, text = n, raw[2:] if block.lang == "console" else raw
        elif found and raw.strip():
            found[-1] = Command(found[-1].line, found[-1].text, found[-1].expected + (raw,))
            continue
        if text and _complete(text):
            if shlex.split(text, comments=True):
                found.append(Command(start, text))
            text = ""
    return found


def _complete(text: str) -> bool:
    if text.rstrip().endswith("\\"):
        return False
    try:
        shlex.split(text, comments=True)
    except ValueError:  # an open quote: the command goes on on the next line
        return False
    return True


def port(text: str) -> int | None:
    """The port a server command listens on: its --port, else a lone number in it."""
    option = re.search(r"--port[= ](\d+)", text)
    if option:
        return int(option[1])
    numbers = [int(t) for t in re.findall(r"(?<![\w:./-])\d{4,5}(?![\w.:/])", text)]
    return next((n for n in numbers if 1024 <= n < 65536), None)


# ---------------------------------------------------------------- the site


def site_config(mkdocs_yml: Path) -> tuple[dict, Path]:
    """An MkDocs config (tags such as !!python/name read as nothing) and its docs_dir."""
    import yaml  # noqa: PLC0415 (a test extra; parsing pages needs no yaml)

    class Loader(yaml.SafeLoader):
        """Reads a config with tags (!!python/name:..., !ENV) as plain values."""

    Loader.add_multi_constructor("", lambda loader, tag, node: None)
    config = yaml.load(mkdocs_yml.read_text(encoding="utf-8"), Loader=Loader) or {}
    return config, mkdocs_yml.parent / config.get("docs_dir", "docs")


def site_pages(mkdocs_yml: Path) -> list[Path]:
    """The pages of an MkDocs site in nav order (without a nav: every page, sorted)."""
    config, docs_dir = site_config(mkdocs_yml)
    if "nav" not in config:
        return sorted(docs_dir.rglob("*.md"))
    return [docs_dir / page for page in _nav_files(config["nav"])]


def _nav_files(nav) -> list[str]:
    if isinstance(nav, str):
        return [] if re.match(r"^\w+://", nav) else [nav]
    items = nav.values() if isinstance(nav, dict) else nav or []
    return [page for item in items for page in _nav_files(item)]


def doc_pages(repo: Path) -> list[Path]:
    """README.md first, then the site's pages in nav order."""
    site = repo / "docs" / "mkdocs.yml"
    return [repo / "README.md"] + (site_pages(site) if site.exists() else [])

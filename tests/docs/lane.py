"""The docs lane: README.md and the docs site's pages, run the way a user follows them.

Pages run in order (README.md, then ``docs/mkdocs.yml``'s nav) in one workspace: a copy of the
repository's files, with the installed venv's ``bin`` first on ``PATH``, ``HOME`` in a scratch
directory, no ``ESTFLOW_*`` variable, and the copy's own packages on ``PYTHONPATH``. Every fenced ``bash``/``console`` block runs in its own
``bash -euo pipefail`` session, a ``python`` block as a script; an HTML comment on the line right
before a fence changes that::

    <!-- lane: cluster -->          each `estflow SUB ...` line: `estflow SUB --help` exits 0 and
                                    the line parses with the CLI's parser; `estflow compile` runs
    <!-- lane: background -->       a server: started, waited for on its --port, stopped at page end
    <!-- lane: exit N -->           the block's last command exits with status N
    <!-- lane: output -->           each line appears in the previous block's output (... = any)
    <!-- lane: skip REASON -->      not run (REASON mandatory)
    <!-- lane: python-fragment -->  compiled only, its `import estflow...` statements imported

A ``console`` block's ``$ `` lines are its commands and the other lines their expected output,
checked as an ``output`` block is. A failure names the page, the block, the line in the page,
the command, its exit status and the tail of its output.
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from tests.docs.pages import RUN_LANGS
from tests.docs.pages import Block
from tests.docs.pages import Command
from tests.docs.pages import Page
from tests.docs.pages import commands
from tests.docs.pages import parse_page
from tests.docs.pages import port
from tests.docs.pages import problems

BLOCK_TIMEOUT_S = 900
READY_TIMEOUT_S = 180
_PREAMBLE = ('set -euo pipefail\n'
             'trap \'printf "%s %s\\n" "$LINENO" "$?" > "$LANE_ERR"\' ERR\n')


@dataclass(frozen=True)
class Failure:
    block: Block
    line: int
    command: str
    message: str
    status: int | None = None
    tail: str = ""

    def __str__(self) -> str:
        status = "" if self.status is None else f" (exit status {self.status})"
        return (f"{self.block.page}:{self.line} (block {self.block.index}): `{self.command}`: "
                f"{self.message}{status}\n{self.tail}").rstrip()


# ---------------------------------------------------------------- the workspace


def make_workspace(repo: Path, dest: Path) -> Path:
    """A copy of the repository's files (tracked, and untracked ones git does not ignore), with
    their times, and a view of the installed venv at ``.venv``."""
    listed = subprocess.run(["git", "ls-files", "-coz", "--exclude-standard"], cwd=repo,
                            capture_output=True, check=True).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        source = repo / rel
        if source.is_file() or source.is_symlink():  # a tracked file deleted here is not copied
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / rel, follow_symlinks=False)
    _venv_view(Path(sys.prefix), dest / ".venv")
    return dest


def _venv_view(venv: Path, dest: Path) -> None:
    """The venv as ``make install`` leaves it: its folders and pyvenv.cfg linked (nothing is
    installed again, nothing written into the real one), its stamp files new, so that a
    documented ``make`` target finds estflow installed."""
    if venv == Path(sys.base_prefix):
        return
    dest.mkdir(parents=True)
    for entry in venv.iterdir():
        if entry.is_dir() or entry.name == "pyvenv.cfg":
            (dest / entry.name).symlink_to(entry)
        else:
            (dest / entry.name).touch()


def code_view(workspace: Path, dest: Path) -> dict[str, str]:
    """PYTHONPATH to the workspace's own packages (pyproject's package-dir, linked under
    ``dest``), ahead of the venv's editable install: the lane runs the code of the copy it
    started with, as a checkout runs its own, even while the repository changes under it."""
    config = tomllib.loads((workspace / "pyproject.toml").read_text(encoding="utf-8"))
    folders = config.get("tool", {}).get("setuptools", {}).get("package-dir", {})
    for name, folder in sorted(folders.items()):
        link = dest / name.replace(".", "/")
        if name and not any(parent.is_symlink() for parent in link.parents):
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to((workspace / folder).resolve())
    return {"PYTHONPATH": str(dest)} if folders else {}


def lane_env(scratch: Path) -> dict[str, str]:
    """The environment of a user who installed estflow: the venv's bin first on PATH, a HOME
    and TMPDIR of their own, nothing else inherited (no ESTFLOW_* override)."""
    home, tmp = scratch / "home", scratch / "tmp"
    home.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(parents=True, exist_ok=True)
    path = [str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]
    return {"PATH": os.pathsep.join(path), "HOME": str(home), "TMPDIR": str(tmp),
            "LANG": "C.UTF-8"}


# ---------------------------------------------------------------- running


def run_lane(repo: Path, pages: list[Path], scratch: Path) -> tuple[list[Failure], Lane]:
    """Runs the pages in order in one new workspace; the failures (at most one a page: a page
    stops at its first) and the lane (``walls``: seconds per block)."""
    parsed = [parse_page(path, _name(path, repo)) for path in pages]
    found = [problem for page in parsed for problem in problems(page)]
    if found:
        raise ValueError("the docs do not follow the lane's convention:\n" + "\n".join(found))
    lane = Lane(make_workspace(repo, scratch / "workspace"), scratch)
    return [failure for page in parsed for failure in lane.run_page(page)], lane


def _name(path: Path, repo: Path) -> str:
    return str(path.relative_to(repo)) if path.is_relative_to(repo) else path.name


class Lane:
    """Runs blocks in one workspace; the servers a page starts are stopped at its end, however
    it ends."""

    def __init__(self, workspace: Path, scratch: Path):
        self.workspace, self.scratch = workspace, scratch
        self.env = lane_env(scratch) | code_view(workspace, scratch / "code")
        self.walls: list[tuple[str, float]] = []
        self._helps: dict[str, tuple[int, str]] = {}

    def run_page(self, page: Page) -> list[Failure]:
        with contextlib.ExitStack() as servers:
            previous = ""
            for block in page.blocks:
                started = time.monotonic()
                failure, previous = self._run_block(block, previous, servers)
                self.walls.append((block.where(), time.monotonic() - started))
                # Kept for whoever writes an output block or reads a failure.
                (self.scratch / f"{_slug(block)}.out").write_text(previous, encoding="utf-8")
                if failure:
                    return [failure]
        return []

    def _run_block(self, block: Block, previous: str, servers) -> tuple[Failure | None, str]:
        kind = block.marker or block.lang
        if kind == "output":
            return _check_output(block, previous), previous
        if kind == "skip" or block.lang not in RUN_LANGS:
            return None, previous
        if kind == "cluster":
            return self._cluster(block), previous
        if kind == "background":
            return self._background(block, servers)
        if kind == "python-fragment":
            return self._fragment(block), previous
        if block.lang == "python":
            return self._python(block)
        return self._shell(block)

    def _call(self, argv: list[str], extra: dict | None = None) -> tuple[int, str]:
        proc = subprocess.Popen(argv, cwd=self.workspace, env={**self.env, **(extra or {})},
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            out = proc.communicate(timeout=BLOCK_TIMEOUT_S)[0]
        except subprocess.TimeoutExpired:
            _stop(proc)
            return -1, proc.communicate()[0] + f"\n[lane] stopped after {BLOCK_TIMEOUT_S} s"
        _stop(proc)  # what the block left running in its session
        return proc.returncode, out

    def _bash(self, script: str, name: str) -> tuple[int, str, int | None]:
        """Runs a script; its status, output and the line of the command that failed."""
        path, err = self.scratch / f"{name}.sh", self.scratch / f"{name}.err"
        path.write_text(script, encoding="utf-8")
        err.unlink(missing_ok=True)
        status, out = self._call(["bash", str(path)], {"LANE_ERR": str(err)})
        line = int(err.read_text().split()[0]) if err.exists() else None
        return status, out, line

    def _shell(self, block: Block) -> tuple[Failure | None, str]:
        cmds = commands(block)
        if not cmds:
            return None, ""
        script, page_lines = _script(block, cmds)
        status, out, line = self._bash(script, _slug(block))
        failed = _owner(cmds, page_lines, line) if line else cmds[-1]
        want = int(block.arg) if block.marker == "exit" else 0
        if status != want or (status and failed is not cmds[-1]):
            message = f"exit status {want} expected" if want else "failed"
            return Failure(block, failed.line, _first(failed.text), message, status,
                           _tail(out)), out
        return _check_console(block, cmds, out), out

    def _python(self, block: Block) -> tuple[Failure | None, str]:
        path = self.scratch / f"{_slug(block)}.py"
        path.write_text(block.text, encoding="utf-8")
        status, out = self._call([sys.executable, str(path)])
        want = int(block.arg) if block.marker == "exit" else 0
        if status == want:
            return None, out
        lines = re.findall(rf'File "{re.escape(str(path))}", line (\d+)', out)
        line = block.line + int(lines[-1]) if lines else block.line
        return Failure(block, line, "python (the block as a script)",
                       f"exit status {want} expected" if want else "failed", status,
                       _tail(out)), out

    def _fragment(self, block: Block) -> Failure | None:
        try:
            tree = ast.parse(block.text, filename=block.page)
        except SyntaxError as err:
            return Failure(block, block.line + (err.lineno or 1), "python fragment",
                           f"does not compile: {err.msg}")
        imports = [ast.unparse(node) for node in ast.walk(tree) if _imports_estflow(node)]
        if not imports:
            return None
        status, out = self._call([sys.executable, "-c", "\n".join(imports)])
        return Failure(block, block.line + 1, "; ".join(imports), "does not import", status,
                       _tail(out)) if status else None

    def _cluster(self, block: Block) -> Failure | None:
        """Each `estflow SUB ...` line: its SUB's help, and the line parsed by the CLI's own
        parser; `estflow compile` lines run (compiling needs no cluster)."""
        for cmd in commands(block):
            argv = _estflow_argv(cmd.text)
            problem = None if argv is None else self._cluster_command(argv, cmd, block)
            if problem:
                return Failure(block, cmd.line, _first(cmd.text), *problem)
        return None

    def _cluster_command(self, argv: list[str], cmd: Command, block: Block):
        if argv[:1] == ["compile"]:
            status, out, _ = self._bash(_PREAMBLE + cmd.text + "\n", _slug(block) + "_compile")
            return ("failed", status, _tail(out)) if status else None
        if argv and not argv[0].startswith("-"):
            if argv[0] not in self._helps:
                self._helps[argv[0]] = self._call(["estflow", argv[0], "--help"])
            status, out = self._helps[argv[0]]
            if status:
                return (f"`estflow {argv[0]} --help` failed", status, _tail(out))
        return _parse_error(argv)

    def _background(self, block: Block, servers) -> tuple[Failure | None, str]:
        number, first = port(block.text), _first(commands(block)[0].text)
        if _answers(number):
            return Failure(block, block.line + 1, first, f"port {number} already answers before "
                           "the server starts (another process holds it)"), ""
        path, log = self.scratch / f"{_slug(block)}.sh", self.scratch / f"{_slug(block)}.log"
        path.write_text(_PREAMBLE + block.text, encoding="utf-8")
        with log.open("w") as sink:
            proc = subprocess.Popen(["bash", str(path)], cwd=self.workspace, env=self.env,
                                    stdin=subprocess.DEVNULL, stdout=sink,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        servers.callback(_stop, proc)
        problem = _wait_ready(proc, number)
        out = log.read_text(encoding="utf-8", errors="replace")
        return (Failure(block, block.line + 1, first, problem, proc.poll(), _tail(out))
                if problem else None), out


def _script(block: Block, cmds: list[Command]) -> tuple[str, list[int]]:
    """The block as a script, and the page line of each of its lines after the preamble: a bash
    block verbatim (a here-document keeps its blank lines), a console block's commands."""
    if block.lang == "bash":
        body = block.text
        return _PREAMBLE + body, [block.line + 1 + n for n in range(len(body.splitlines()))]
    page_lines = [cmd.line + n for cmd in cmds for n in range(len(cmd.text.splitlines()))]
    return _PREAMBLE + "\n".join(cmd.text for cmd in cmds) + "\n", page_lines


def _owner(cmds: list[Command], page_lines: list[int], script_line: int) -> Command:
    """The command a line of the script (as bash's $LINENO counts) belongs to."""
    body = min(max(script_line - _PREAMBLE.count("\n") - 1, 0), len(page_lines) - 1)
    before = [cmd for cmd in cmds if cmd.line <= page_lines[body]]
    return before[-1] if before else cmds[0]


def _check_console(block: Block, cmds: list[Command], out: str) -> Failure | None:
    for cmd in cmds:
        missing = _missing(cmd.expected, out)
        if missing:
            return Failure(block, cmd.line, _first(cmd.text), "its output lacks the line(s) "
                           "shown:\n  " + "\n  ".join(text for _, text in missing), 0, _tail(out))
    return None


def _check_output(block: Block, previous: str) -> Failure | None:
    missing = _missing(block.text.splitlines(), previous)
    if not missing:
        return None
    return Failure(block, block.line + 1 + missing[0][0], "(expected output)",
                   "the previous block's output lacks the line(s):\n  "
                   + "\n  ".join(text for _, text in missing), None, _tail(previous))


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _missing(expected, actual: str) -> list[tuple[int, str]]:
    """The expected lines (offset, text) that no line of ``actual`` matches: whitespace runs
    match any whitespace, ``...`` anything."""
    seen = [text.strip() for text in re.split(r"[\r\n]+", _ANSI.sub("", actual))]
    return [(n, text) for n, text in enumerate(expected)
            if text.strip() not in ("", "...")
            and not any(_pattern(text).search(line) for line in seen)]


def _pattern(text: str) -> re.Pattern:
    pieces = [r"\s+".join(map(re.escape, piece.split())) for piece in text.strip().split("...")]
    return re.compile(".*".join(pieces))


def _estflow_argv(text: str) -> list[str] | None:
    # A backslash-newline joins lines in bash; shlex would make the newline a word of its own.
    words = shlex.split(text.replace("\\\n", " "), comments=True)
    while words and re.match(r"^\w+=", words[0]):  # VAR=value before the command
        words = words[1:]
    return words[1:] if words[:1] == ["estflow"] else None


def _parse_error(argv: list[str]):
    from estflow.pipelines.cli import build_parser  # noqa: PLC0415 (imports kfp)

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(argv)
    except SystemExit as stop:
        if stop.code:
            return ("the CLI's parser refuses it", stop.code, _indent(err.getvalue()))
    return None


def _imports_estflow(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").split(".")[0] == "estflow"
    return isinstance(node, ast.Import) and any(
        alias.name.split(".")[0] == "estflow" for alias in node.names)


def _answers(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _wait_ready(proc: subprocess.Popen, port: int) -> str | None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return f"the server exited before port {port} answered"
        if _answers(port):
            return None
        time.sleep(0.2)
    return f"port {port} did not answer within {READY_TIMEOUT_S} s"


def _stop(proc: subprocess.Popen) -> None:
    """Stops the process's session, every process in it: SIGTERM, then SIGKILL after 15 s."""
    deadline = time.monotonic() + 15
    _signal_group(proc, signal.SIGTERM)
    while _group_alive(proc) and time.monotonic() < deadline:
        time.sleep(0.1)
    _signal_group(proc, signal.SIGKILL)
    proc.wait()


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _group_alive(proc: subprocess.Popen) -> bool:
    proc.poll()  # a leader that exited is reaped, else it would count as alive
    try:
        os.killpg(proc.pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _slug(block: Block) -> str:
    return re.sub(r"\W+", "_", f"{block.page}_{block.index}")


def _first(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else text
    return line + (" ..." if "\n" in text.strip() else "")


def _tail(out: str, lines: int = 30) -> str:
    return _indent("\n".join(out.rstrip().splitlines()[-lines:])[-4000:])


def _indent(text: str) -> str:
    return "\n".join("    | " + line for line in text.rstrip().splitlines())

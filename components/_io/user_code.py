"""The digest of a user function the spec names (``Derive.fn``, ``CustomModel.model_fn``): what
it does, never where it is.

A function is keyed by its own source and that of the definitions it uses, transitively: the
module-level definitions of its file (functions, classes, constants), and those of the user's
modules next to it that it imports (``from my_features import scale``, ``import my_features as
mf`` then ``mf.scale``, ``from .features import scale`` in a package), found relative to the
importing file. All of it is read with ``ast``: nothing of the user's is imported or run. An
installed module (``numpy``, ``tensorflow``) is keyed by its import statement as written.

Not in the digest: the file's name, its path and the module name it was loaded under, so a
pipeline renamed, copied, or run from another checkout or CI workspace has the same digests;
and the definitions the function does not use, so editing another function of the same file
(the model, in a pipeline file) changes nothing.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import os
import uuid
from pathlib import Path

from estflow.components._io.outside_facts import find_module
from estflow.dsl.fingerprints import digest
from estflow.dsl.refs import CallableRef

__all__ = ["code_fingerprint", "function_facts", "code_parts", "module_file"]

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_IMPORTS = (ast.Import, ast.ImportFrom)


def code_fingerprint(ref: CallableRef) -> str:
    """Digest of the function ``ref`` names: its (qualified) name and :func:`code_parts`.
    Unlocatable: a fresh value, so the steps using it always run."""
    return function_facts(ref)["digest"]


def function_facts(ref: CallableRef) -> dict:
    """``{"function": qualified name, "digest": code_fingerprint, "parts": code_parts}``: the
    digest and what it covers, part by part (``estflow runs diff`` names the parts that
    changed; ``parts`` None: the function's file was not found)."""
    parts = code_parts(ref)
    if parts is None:
        found = digest({"ref": str(ref), "unlocated": uuid.uuid4().hex})
    else:
        found = digest({"name": ref.name, "parts": parts})
    return {"function": ref.name, "digest": found, "parts": parts}


def code_parts(ref: CallableRef) -> dict[str, str] | None:
    """Each definition the function ``ref`` names uses -> SHA-256 of its source: names of its
    own file bare (``big_tipper``, ``FACTOR``), those of another user module as imported
    (``my_features.scale``), an installed module's import as the name it binds (``np``), a
    module used whole as its import name. None: the function's file is not found; ``{"":
    digest of the file}`` when the name is not a module-level definition of it."""
    path = module_file(ref)
    if path is None:
        return None
    files: dict[str, _File] = {}
    head = ref.name.split(".")[0]
    if head not in _read(path, files).defined:
        return {"": _sha(files[path].text)}
    parts: dict[str, str] = {}
    seen: set[tuple[str, str]] = set()
    todo: list[tuple[str, str, str, str | None]] = [(path, "", head, None)]
    while todo:
        file, prefix, name, attr = todo.pop()
        if (file, name if attr is None else f"{name}.{attr}") in seen:
            continue
        seen.add((file, name if attr is None else f"{name}.{attr}"))
        todo += _follow(files, file, prefix, name, attr, parts)
    return dict(sorted(parts.items()))


def module_file(ref: CallableRef) -> str | None:
    """The file of the function's module: the ref's file, else found by module name."""
    if ref.file and os.path.isfile(ref.file):
        return ref.file
    return find_module(ref.module)


@dataclasses.dataclass
class _File:
    path: Path
    text: str
    defined: dict[str, ast.AST]


def _read(path: str, files: dict[str, _File]) -> _File:
    if path not in files:
        text = Path(path).read_text(encoding="utf-8")
        files[path] = _File(Path(path), text, _top_level(ast.parse(text)))
    return files[path]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _follow(files: dict[str, _File], file: str, prefix: str, name: str, attr: str | None,
            parts: dict[str, str]) -> list[tuple[str, str, str, str | None]]:
    """Record the part ``name`` (of ``file``, named ``prefix + name``) and return the
    references to follow from it; ``attr``: the attribute of ``name`` used (``mf.scale``)."""
    source = files[file]
    node = source.defined.get(name)
    if node is None:  # a builtin, a local variable, a name the module does not define
        return []
    segment = ast.get_source_segment(source.text, node) or ""
    if not isinstance(node, _IMPORTS):
        parts[prefix + name] = _sha(segment)
        return [(file, prefix, n, a) for n, a in _references(node)]
    target = _imported(source, node, name)
    if target is None:  # an installed module: its import as written
        parts[prefix + name] = _sha(segment)
        return []
    module_path, as_written, member = target
    other = _read(module_path, files)
    if member is not None and member in other.defined:
        return [(module_path, as_written + ".", member, attr)]
    if member is not None:  # ``from package import submodule``
        sub = _module_path(other.path.parent, member)
        if sub is None:
            parts[prefix + name] = _sha(segment)
            return []
        module_path, as_written = sub, f"{as_written}.{member}"
        other = _read(module_path, files)
    if attr is not None and attr in other.defined:
        return [(module_path, as_written + ".", attr, None)]
    sub = (_module_path(other.path.parent, attr)
           if attr is not None and other.path.name == "__init__.py" else None)
    if sub is not None:  # ``import pkg.sub`` then ``pkg.sub.f``: the submodule, whole
        parts[f"{as_written}.{attr}"] = _sha(_read(sub, files).text)
        return []
    parts[as_written] = _sha(other.text)  # the module used whole
    return []


def _references(node: ast.AST) -> list[tuple[str, str | None]]:
    """The names ``node`` uses, each with the attribute read of it (``mf.scale``), if any."""
    attrs = {id(n.value): n.attr for n in ast.walk(node)
             if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
    return [(n.id, attrs.get(id(n))) for n in ast.walk(node) if isinstance(n, ast.Name)]


def _imported(source: _File, node: ast.AST, name: str) -> tuple[str, str, str | None] | None:
    """Where the import ``node`` binding ``name`` leads when it is a user module next to
    ``source``: (its file, the module as written, the member imported or None for the
    module itself); None for an installed module."""
    if isinstance(node, ast.ImportFrom):
        alias = next(a for a in node.names if (a.asname or a.name) == name)
        written = "." * node.level + (node.module or "")
        found = _local_module(source.path, node.module or "", node.level)
        return None if found is None else (found, written, alias.name)
    alias = next(a for a in node.names if (a.asname or a.name).split(".")[0] == name)
    dotted = alias.name if alias.asname else alias.name.split(".")[0]
    found = _local_module(source.path, dotted, 0)
    return None if found is None else (found, dotted, None)


def _local_module(importer: Path, dotted: str, level: int) -> str | None:
    """The file of module ``dotted`` (``level``: leading dots of a relative import) among the
    user's files around ``importer``: its directory and, for a file in a package, the
    directory that holds the top package. None: not a user file there (installed)."""
    if level:
        base = importer.parent
        for _ in range(level - 1):
            base = base.parent
        return _module_path(base, dotted) if dotted else _existing(base / "__init__.py")
    roots = [importer.parent]
    top = importer.parent
    while (top / "__init__.py").is_file():
        top = top.parent
    if top != importer.parent:
        roots.append(top)
    return next((p for p in (_module_path(r, dotted) for r in roots) if p is not None), None)


def _module_path(base: Path, dotted: str) -> str | None:
    folder = base.joinpath(*dotted.split("."))
    return _existing(folder.with_suffix(".py")) or _existing(folder / "__init__.py")


def _existing(path: Path) -> str | None:
    return str(path) if path.is_file() else None


def _top_level(tree: ast.Module) -> dict[str, ast.AST]:
    """Module-level name -> the statement defining it (defs, classes, assignments, imports)."""
    out: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, _DEFS):
            out[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        out[name.id] = node
        elif isinstance(node, _IMPORTS):
            for alias in node.names:
                out[(alias.asname or alias.name).split(".")[0]] = node
    return out

"""``estflow migrate``'s import rewrites (a mixin of :class:`.migrate._Migrator`): TensorFlow
imports of the estimator and feature-column modules become estflow's, private TF modules the
public names, and the imports the rewritten text needs are added."""

from __future__ import annotations

import ast
from collections.abc import Iterable

from estflow.pipelines.migrate.tables import _OLD_ENGINE
from estflow.pipelines.migrate.tables import ESTFLOW_MODULE
from estflow.pipelines.migrate.tables import ESTIMATOR_NAMES
from estflow.pipelines.migrate.tables import EXPORT_NAMES
from estflow.pipelines.migrate.tables import FEATURE_COLUMN_NAMES
from estflow.pipelines.migrate.tables import short as _short
from estflow.pipelines.migrate.tf1 import ENGINE_RNN_NAMES
from estflow.pipelines.migrate.tf1 import LEGACY_ESTIMATOR_ROOTS
from estflow.pipelines.migrate.tf1 import PRIVATE_COLUMN_CLASSES
from estflow.pipelines.migrate.tf1 import PRIVATE_COLUMN_MODULES
from estflow.pipelines.migrate.tf1 import private_estimator_target


class ImportRewrites:
    """Import handling of the migrator (``self`` is a :class:`.migrate._Migrator`)."""

    @staticmethod
    def canonical(path: Iterable[str]) -> tuple[str, ...]:
        """``tensorflow.compat.v1.X`` and ``.v2.X`` -> ``tensorflow.X``."""
        path = tuple(path)
        # a loop: `tf.compat.v1.X` under `import tensorflow.compat.v1 as tf` spells it twice
        while path[:3] in (("tensorflow", "compat", "v1"), ("tensorflow", "compat", "v2")):
            path = ("tensorflow",) + path[3:]
        return path

    def collect_imports(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and self._renamed_engine(node):
                continue
            if isinstance(node, ast.Import):
                self._import(node)
            elif isinstance(node, ast.ImportFrom):
                self._import_from(node)
        for name, path in self.aliases.items():
            if path == ("tensorflow",) and name not in self.estflow_aliases:
                if self.tf_alias is None or name == "tf":
                    self.tf_alias = name

    def _renamed_engine(self, node: ast.Import | ast.ImportFrom) -> bool:
        """An import of the engine under its estflow 0.1 name (``estflow.components.estimator``,
        ``from estflow.components import estimator``) -> ``estflow.estimator``."""
        def renamed(name: str) -> str:
            if name == _OLD_ENGINE or name.startswith(_OLD_ENGINE + "."):
                return ESTFLOW_MODULE + name[len(_OLD_ENGINE):]
            return name

        def listed(aliases) -> str:
            return ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in aliases)

        if isinstance(node, ast.Import):
            if not any(renamed(a.name) != a.name for a in node.names):
                return False
            names = [ast.alias(renamed(a.name), a.asname) for a in node.names]
            self._replace_statement(node, ["import " + listed(names)])
            return True
        if node.level or not node.module:
            return False
        if renamed(node.module) != node.module:
            self._replace_statement(node, [f"from {renamed(node.module)} import "
                                           + listed(node.names)])
            return True
        moved = [a for a in node.names if a.name == "estimator"]
        if node.module != _OLD_ENGINE.rpartition(".")[0] or not moved:
            return False
        kept = [a for a in node.names if a.name != "estimator"]
        lines = [f"from {node.module} import {listed(kept)}"] if kept else []
        self._replace_statement(node, [*lines, "from estflow import " + listed(moved)])
        return True

    def _import(self, node: ast.Import) -> None:
        rewritten, kept = [], []
        for alias in node.names:
            parts = tuple(alias.name.split("."))
            if parts[0] == "tensorflow_estimator":
                self.note(node, "could not", f"import {alias.name}: import the engine instead "
                          f"(import {ESTFLOW_MODULE} as estimator)")
            if parts[0] != "tensorflow":
                kept.append(alias)
                continue
            if alias.asname is None:
                self.aliases["tensorflow"] = ("tensorflow",)
                kept.append(alias)
                continue
            canon = self.canonical(parts)
            self.aliases[alias.asname] = parts
            target = {("tensorflow", "estimator"): "", ("tensorflow", "feature_column"):
                      "feature_column"}.get(canon)
            if target is None:
                kept.append(alias)
                continue
            self.estflow_aliases[alias.asname] = target
            if target == "":
                self.estimator_alias = alias.asname
            rewritten.append((alias, target))
        if not rewritten:
            return
        lines = []
        if kept:
            lines.append("import " + ", ".join(
                a.name + (f" as {a.asname}" if a.asname else "") for a in kept))
        for alias, target in rewritten:
            lines.append(f"import {ESTFLOW_MODULE} as {alias.asname}" if target == "" else
                         f"from {ESTFLOW_MODULE} import {target} as {alias.asname}")
        self._replace_statement(node, lines)

    def _import_from(self, node: ast.ImportFrom) -> None:
        module = tuple((node.module or "").split("."))
        if node.level or module[0] not in ("tensorflow", "tensorflow_estimator"):
            return
        if module[:3] in LEGACY_ESTIMATOR_ROOTS or module == ("tensorflow_estimator",):
            self._private_estimator_import(node, module)
            return
        if module[0] == "tensorflow_estimator":
            self.note(node, "could not", f"from {node.module} import ...: import the engine "
                      f"instead (import {ESTFLOW_MODULE} as estimator)")
            return
        if module == ("tensorflow", "python", "feature_column"):
            self._private_column_import(node, module)
            return
        canon = self.canonical(module)
        if canon in (("tensorflow", "estimator"), ("tensorflow", "feature_column"),
                     ("tensorflow", "estimator", "export")):
            self._from_estimator_module(node, canon)
            return
        if canon != ("tensorflow",):
            if canon[:2] in (("tensorflow", "contrib"), ("tensorflow", "nn")):
                for alias in node.names:  # TF 1 RNN cells by these names: rewrite_chains
                    self.aliases[alias.asname or alias.name] = module + (alias.name,)
                self._tf1_rnn_import(node, canon)
            return
        rewritten, kept = [], []
        for alias in node.names:
            name = alias.asname or alias.name
            if alias.name in ("estimator", "feature_column"):
                target = "" if alias.name == "estimator" else "feature_column"
                self.aliases[name] = module + (alias.name,)
                self.estflow_aliases[name] = target
                if target == "":
                    self.estimator_alias = name
                rewritten.append((name, target))
            else:
                if alias.name != "*":
                    self.aliases[name] = module + (alias.name,)
                kept.append(alias)
        if not rewritten:
            return
        lines = []
        if kept:
            lines.append(f"from {node.module} import " + ", ".join(
                a.name + (f" as {a.asname}" if a.asname else "") for a in kept))
        for name, target in rewritten:
            lines.append(f"import {ESTFLOW_MODULE} as {name}" if target == "" else
                         f"from {ESTFLOW_MODULE} import {target} as {name}")
        self._replace_statement(node, lines)

    def _tf1_rnn_import(self, node: ast.ImportFrom, canon: tuple[str, ...]) -> None:
        """``from tensorflow.contrib import rnn`` / ``from tensorflow.contrib.rnn import
        GRUCell``: estflow.estimator.rnn_cell (tf.contrib is gone from TF 2)."""
        if canon == ("tensorflow", "contrib") and [a.name for a in node.names] == ["rnn"]:
            name = node.names[0].asname or "rnn"
            self._replace_statement(node, [f"from {ESTFLOW_MODULE} import rnn_cell as {name}"])
        elif canon == ("tensorflow", "contrib", "rnn") and all(
                a.name in ENGINE_RNN_NAMES for a in node.names):
            self._replace_statement(node, [f"from {ESTFLOW_MODULE}.rnn_cell import " + ", ".join(
                a.name + (f" as {a.asname}" if a.asname else "") for a in node.names)])

    def _private_column_import(self, node: ast.ImportFrom, module: tuple[str, ...]) -> None:
        """``from tensorflow.python.feature_column import feature_column_v2 as fc``: programs
        filter columns with ``isinstance(c, fc.NumericColumn)``, which never matches estflow's
        columns: the module becomes estflow's under the same name (class names: see
        :meth:`rewrite_chains`)."""
        if any(a.name not in PRIVATE_COLUMN_MODULES for a in node.names):
            self.note(node, "could not", f"from {node.module} import "
                      f"{', '.join(a.name for a in node.names)}: a private TF module estflow "
                      f"does not have; use {ESTFLOW_MODULE}.feature_column")
            return
        lines = []
        for alias in node.names:
            name = alias.asname or alias.name
            self.aliases[name] = module + (alias.name,)
            lines.append(f"from {ESTFLOW_MODULE} import feature_column" +
                         (f" as {name}" if name != "feature_column" else ""))
        self._replace_statement(node, lines)

    def _private_column_class(self, node: ast.AST, canon: tuple[str, ...], nodes, raw,
                              root_len: int) -> None:
        """``fc.<TF class>`` on a private feature-column module: estflow's class."""
        name = canon[4]
        if name in PRIVATE_COLUMN_CLASSES:
            covered = self.node_for(raw, nodes, root_len, 5)
            new = f"{self.original(covered.value)}.{PRIVATE_COLUMN_CLASSES[name]}"
            old = self.original(covered)
            if new != old and self.replace(covered, new):
                self.note(node, "changed", f"{old} -> {new} (estflow's column class)")
        elif name not in FEATURE_COLUMN_NAMES:
            self.note(node, "could not", f"{'.'.join(canon[2:5])}: estflow's feature columns "
                      "have no such name (left as is)")

    def _private_estimator_import(self, node: ast.ImportFrom, module: tuple[str, ...]) -> None:
        """``from tensorflow.python.estimator.<module> import X`` (tf.estimator's private
        modules, also ``tensorflow_estimator``'s): the public estflow name, or reported."""
        lines = []
        for alias in node.names:
            target = private_estimator_target(module, alias.name, ESTIMATOR_NAMES, EXPORT_NAMES)
            if target is None:
                self.note(node, "could not", f"from {node.module} import {alias.name}: a "
                          "private tf.estimator module estflow does not have; use the public "
                          f"name (import {ESTFLOW_MODULE} as estimator; estimator.<name>)")
                return
            name = alias.asname or alias.name
            bound = target.rpartition(" ")[2].rpartition(".")[2]
            lines.append(target if name == bound and not target.startswith("import ")
                         else f"{target} as {name}")
        self._replace_statement(node, lines)

    def _from_estimator_module(self, node: ast.ImportFrom, canon: tuple[str, ...]) -> None:
        names = []
        for alias in node.names:
            target = self.estflow_target(canon + (alias.name,))
            if target is None or target[0] != len(canon) + 1:
                self.note(node, "could not", f"from {node.module} import {alias.name}: "
                          "estflow's engine has no such name")
                return
            path = target[1]
            module, _, attr = path.rpartition(".")
            names.append((module, attr, alias.asname or alias.name))
        lines = []
        for module, attr, name in names:
            full = ESTFLOW_MODULE + (f".{module}" if module else "")
            lines.append(f"from {full} import {attr}" + (f" as {name}" if name != attr else ""))
        self._replace_statement(node, lines)

    def _replace_statement(self, node: ast.stmt, lines: list[str]) -> None:
        indent = " " * node.col_offset
        new = ("\n" + indent).join(lines)
        old = self.original(node)
        if self.replace(node, new):
            self.note(node, "changed", f"{_short(old)} -> {_short('; '.join(lines))}")

    def add_imports(self) -> None:
        lines = []
        if self.need_tf:
            lines.append(f"import tensorflow as {self.tf_alias}" if self.tf_alias != "tensorflow"
                         else "import tensorflow")
        if self.need_estimator and self.estimator_alias not in self.estflow_aliases:
            lines.append(f"import {ESTFLOW_MODULE} as {self.estimator_alias}")
        if not lines:
            return
        # after the first top-level TensorFlow import, else after the leading imports
        body = self.tree.body
        anchor = None
        for stmt in body:
            if isinstance(stmt, ast.Import) and any(a.name.split(".")[0] == "tensorflow"
                                                    for a in stmt.names):
                anchor = stmt
                break
            if isinstance(stmt, ast.ImportFrom) and (stmt.module or "").split(".")[0] == \
                    "tensorflow":
                anchor = stmt
                break
        if anchor is None:
            for stmt in body:
                if isinstance(stmt, (ast.Import, ast.ImportFrom)) or (
                        isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
                        and isinstance(stmt.value.value, str)):
                    anchor = stmt
                else:
                    break
        if anchor is None:
            pos = 0
            line, where = 1, "at the top"
        else:
            pos = self.line_starts[anchor.end_lineno]
            line, where = anchor.end_lineno, "after this line"
        if pos > len(self.data):
            pos = len(self.data)
        prefix = "" if pos == 0 or self.data[pos - 1:pos] == b"\n" else "\n"
        self.edits.append((pos, pos, prefix + "\n".join(lines) + "\n"))
        for text in lines:
            self.note(line, "changed", f"added `{text}` {where}")

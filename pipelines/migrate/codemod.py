"""``estflow migrate``: rewrite a tf.estimator program (TF <= 2.15) into an estflow one.

A codemod in the spirit of ``tf_upgrade_v2``: it parses the program with :mod:`ast`, computes
text edits for the spans it changes and applies them to the original text, so everything it
does not change (comments, formatting, blank lines) is kept byte for byte. It never imports
the program, TensorFlow or estflow's engine.

What it rewrites (each change is reported with its line number):

- ``tf.estimator.X`` / ``tf.compat.v1.estimator.X`` -> ``estimator.X``, with
  ``import estflow.estimator as estimator`` added after the TensorFlow import
  (``tf_estimator`` or ``estflow_estimator`` when the program already uses the name
  ``estimator``); ``tf.estimator.experimental.stop_if_*`` -> ``estimator.stop_if_*``,
  ``make_early_stopping_hook`` -> ``estimator.early_stopping.make_early_stopping_hook``;
  ``tf.estimator.export.X`` -> ``estimator.export.X``;
  ``tf.keras.estimator.model_to_estimator`` -> ``estimator.model_to_estimator``.
- ``tf.feature_column.X`` (also ``compat.v1``/``compat.v2``) -> ``estimator.feature_column.X``;
  ``tf.keras.layers.DenseFeatures`` (v1 and v2) -> ``estimator.feature_column.DenseFeatures``.
- imports: ``from tensorflow import estimator [as e]`` and
  ``import tensorflow.compat.v2.feature_column as fc`` become the estflow modules under the same
  names.
- TF 1 hooks: ``tf.compat.v1.train.{SessionRunHook, LoggingTensorHook, StopAtStepHook, ...}`` ->
  the engine's (``estimator.X``).
- ``tf.estimator.inputs.numpy_input_fn`` / ``pandas_input_fn`` -> ``estimator.inputs.X``: the
  engine's ``tf.data`` pipelines, reading the batches 2.15's queues read (its arguments
  evaluated once, at the call, as 2.15 did).
- ``tf.compat.v1.estimator``'s premade classes get ``loss_reduction="sum"``, their TF 1 default
  (TF 2's and estflow's is ``sum_over_batch_size``), unless the call sets it; their DNN part
  given no optimizer gets TF 1's default, ``tf.compat.v1.train.AdagradOptimizer(0.05)``.
- ``tf.compat.v1.distribute.X`` strategies -> ``tf.distribute.X`` (the engine takes TF 2 ones).
- Keras 3: ``tf.keras.optimizers.legacy.X`` -> ``tf.keras.optimizers.X`` (there is no legacy
  namespace in Keras 3); ``tf.compat.v1.layers.Dense``/``Flatten``/... and every functional
  layer (``conv2d``, ``dropout``, ...: :mod:`.migrate_tf1`) -> ``tf.keras.layers``
  (``tf.compat.v1.layers`` is gone in TF 2.16+), or ``estimator.layers.X`` where TF 1 shared
  the layer's variables by scope name (``reuse=``, ``variable_scope(reuse=...)``); TF 1 RNN
  cells -> ``estimator.rnn_cell.X``; private ``tensorflow.python.estimator`` and
  ``tensorflow.python.feature_column`` imports: :mod:`.migrate_tf1`;
  ``tf.compat.v1.train.exponential_decay(lr, global_step=get_global_step(), ...)`` and the other
  TF 1 decays over the global step -> the ``tf.keras.optimizers.schedules`` equivalent.
- removed: the TF 2.15-only ``optimizer.iterations = tf.compat.v1.train.get_or_create_global_step()``
  workaround (the engine keeps the global step), and ``tf.compat.v1.disable_eager_execution()``
  / ``disable_v2_behavior()`` (the engine runs TF 2: eager plus ``tf.function``).
- pandas 3 (estflow's environment): ``df[col].replace(..., inplace=True)`` and the other chained
  ``inplace=True`` calls, which copy-on-write turns into no-ops, -> ``df[col] = df[col].replace(...)``;
  ``df[col].replace(('male', 'female'), (0, 1))`` (values replaced by others given as a tuple,
  list or dict) -> ``....infer_objects()``: pandas < 3 inferred the result's dtype (int64),
  pandas 3 keeps object, which ``tf.data`` cannot take.

Report line numbers are the original program's. What it cannot do is reported as "could not" with the line (the text is left as it was): names
estflow's engine does not have (``tf.estimator.experimental.LinearSDCA``, ...),
``EstimatorSpec(scaffold=...)`` other than ``Scaffold(saver=...)``, ``tensorflow_estimator``
imports, and
arguments it cannot carry over. TF 1 idioms the engine runs itself (``tf.compat.v1.train``
optimizers with ``minimize(global_step=...)``, ``tf.compat.v1.metrics``/``losses``) are kept.
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from dataclasses import field

from estflow.pipelines.migrate.calls import CallRewrites
from estflow.pipelines.migrate.imports import ImportRewrites
from estflow.pipelines.migrate.keras import check_keras
from estflow.pipelines.migrate.surface import replacement
from estflow.pipelines.migrate.surface import surface_target
from estflow.pipelines.migrate.tables import EARLY_STOPPING
from estflow.pipelines.migrate.tables import ESTFLOW_MODULE
from estflow.pipelines.migrate.tables import ESTIMATOR_NAMES
from estflow.pipelines.migrate.tables import EXPORT_NAMES
from estflow.pipelines.migrate.tables import FEATURE_COLUMN_NAMES
from estflow.pipelines.migrate.tables import GLOBAL_STEP_FUNCS
from estflow.pipelines.migrate.tables import GRAPH_MODE_SWITCHES
from estflow.pipelines.migrate.tables import PANDAS_INPLACE
from estflow.pipelines.migrate.tables import V1_LAYER_CLASSES
from estflow.pipelines.migrate.tables import V1_TRAIN_HOOKS
from estflow.pipelines.migrate.tables import short as _short
from estflow.pipelines.migrate.tf1 import ENGINE_RNN_NAMES
from estflow.pipelines.migrate.tf1 import RNN_FUNCTIONS
from estflow.pipelines.migrate.tf1 import RNN_REPLACEMENTS

__all__ = ["Change", "Migration", "migrate_source", "migrate_file", "ESTFLOW_MODULE",
           "ESTIMATOR_NAMES", "EXPORT_NAMES", "EARLY_STOPPING", "FEATURE_COLUMN_NAMES",
           "V1_TRAIN_HOOKS"]



def _checkpoint_scaffold(value: ast.expr) -> bool:
    """``Scaffold(saver=...)`` (or ``Scaffold()``): what the engine takes (it refuses, at run
    time, a saver that is not a ``tf.train.Checkpoint``)."""
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return name == "Scaffold" and not value.args and all(k.arg == "saver"
                                                         for k in value.keywords)


def _downcasting_replace(call: ast.Call) -> bool:
    """``df[col].replace(('male', 'female'), (0, 1))``: a pandas ``replace`` of values by
    others (a tuple, list or dict literal among its first two arguments: no ``str.replace``),
    whose result pandas < 3 gave the inferred dtype (int64 here) and pandas 3 leaves object."""
    func = call.func
    return (isinstance(func, ast.Attribute) and func.attr == "replace"
            and isinstance(func.value, ast.Subscript)
            and any(isinstance(a, (ast.Tuple, ast.List, ast.Dict)) for a in call.args[:2]))

@dataclass(frozen=True)
class Change:
    """One line of the report: ``kind`` is ``"changed"``, ``"removed"`` or ``"could not"``."""

    line: int
    kind: str
    message: str

    def __str__(self) -> str:
        return f"{self.line:5d}: {self.kind:<9}  {self.message}"


@dataclass
class Migration:
    """The migrated text and what was done to get it."""

    source: str
    changes: list[Change] = field(default_factory=list)

    @property
    def unresolved(self) -> list[Change]:
        return [c for c in self.changes if c.kind == "could not"]

    def report(self, name: str = "<program>") -> str:
        done = len(self.changes) - len(self.unresolved)
        lines = [f"{name}: {done} change{'s' * (done != 1)}, "
                 f"{len(self.unresolved)} not migrated"]
        lines += [f"  {c}" for c in sorted(self.changes, key=lambda c: (c.line, c.kind))]
        return "\n".join(lines) + "\n"


def migrate_file(path: str | os.PathLike, output: str | os.PathLike | None = None) -> Migration:
    """Migrate the program at ``path``; writes ``output`` when given."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    migration = migrate_source(text, filename=os.fspath(path))
    if output is not None:
        with open(output, "w", encoding="utf-8") as f:
            f.write(migration.source)
    return migration


def migrate_source(text: str, filename: str = "<string>") -> Migration:
    """Migrate a tf.estimator program's text (a ``SyntaxError`` if it does not parse)."""
    return _Migrator(text, filename).run()


class _Migrator(ImportRewrites, CallRewrites):
    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.data = text.encode("utf-8")
        self.tree = ast.parse(text, filename=filename)
        self.line_starts = [0]
        for line in self.data.splitlines(keepends=True):
            self.line_starts.append(self.line_starts[-1] + len(line))
        self.edits: list[tuple[int, int, str]] = []
        self.changes: list[Change] = []
        self.parents: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
        self.used_names = self._names()
        # alias name -> the TensorFlow module it stands for, as a tuple
        self.aliases: dict[str, tuple[str, ...]] = {}
        # alias name -> the estflow module path ("" or "feature_column") it now stands for
        self.estflow_aliases: dict[str, str] = {}
        self.estimator_alias: str | None = None  # the alias of estflow.estimator
        self.need_estimator = False
        self.tf_alias: str | None = None  # an alias of plain `tensorflow`
        self.need_tf = False
        self.claimed: set[int] = set()  # ids of chain nodes a structural rewrite handles

    # -- positions and edits -------------------------------------------------------------------

    def offset(self, line: int, col: int) -> int:
        return self.line_starts[line - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.offset(node.lineno, node.col_offset),
                self.offset(node.end_lineno, node.end_col_offset))

    def original(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.data[start:end].decode("utf-8")

    def render(self, node: ast.AST) -> str:
        """The node's text with the edits made so far inside it applied."""
        start, end = self.span(node)
        return self._render(start, end)

    def _render(self, start: int, end: int) -> str:
        inner = sorted(e for e in self.edits if start <= e[0] and e[1] <= end)
        out, pos = [], start
        for s, e, new in inner:
            out.append(self.data[pos:s].decode("utf-8"))
            out.append(new)
            pos = e
        out.append(self.data[pos:end].decode("utf-8"))
        return "".join(out)

    def edit(self, start: int, end: int, new: str) -> bool:
        """Replace ``[start, end)``; edits inside it are absorbed (``new`` includes them)."""
        for s, e, _ in self.edits:
            overlaps = s < end and start < e
            inside = start <= s and e <= end
            if overlaps and not inside:
                return False
        self.edits = [x for x in self.edits if not (start <= x[0] and x[1] <= end)]
        self.edits.append((start, end, new))
        return True

    def replace(self, node: ast.AST, new: str) -> bool:
        start, end = self.span(node)
        return self.edit(start, end, new)

    def note(self, node: ast.AST | int, kind: str, message: str) -> None:
        line = node if isinstance(node, int) else node.lineno
        change = Change(line, kind, message)
        if change not in self.changes:
            self.changes.append(change)

    # -- names -----------------------------------------------------------------------------------

    def _names(self) -> set[str]:
        names: set[str] = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    names.add((alias.asname or alias.name).split(".")[0])
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                names.update(node.names)
        return names

    def free_name(self, *candidates: str) -> str:
        for name in candidates:
            if name not in self.used_names:
                self.used_names.add(name)
                return name
        i = 2
        while f"{candidates[-1]}{i}" in self.used_names:
            i += 1
        self.used_names.add(f"{candidates[-1]}{i}")
        return f"{candidates[-1]}{i}"

    def estimator_name(self) -> str:
        if self.estimator_alias is None:
            self.estimator_alias = self.free_name("estimator", "tf_estimator", "estflow_estimator")
        self.need_estimator = True
        return self.estimator_alias

    def tf_name(self) -> str:
        if self.tf_alias is None:
            self.tf_alias = self.free_name("tf", "tensorflow")
            self.need_tf = True
        return self.tf_alias

    # -- the passes --------------------------------------------------------------------------------

    def run(self) -> Migration:
        self.collect_imports()
        self.claim_structural_calls()
        self.rewrite_chains()
        self.rewrite_calls()
        self.rewrite_statements()
        self.check_unsupported()
        self.add_imports()
        data = self.data
        for start, end, new in sorted(self.edits, reverse=True):
            data = data[:start] + new.encode("utf-8") + data[end:]
        source = data.decode("utf-8")
        try:
            ast.parse(source)
        except SyntaxError as err:  # a bug here, not in the program
            raise RuntimeError(f"estflow migrate produced invalid Python: {err}") from err
        return Migration(source, sorted(self.changes, key=lambda c: (c.line, c.kind, c.message)))


    # attribute chains --------------------------------------------------------------------------

    def chain(self, node: ast.AST) -> tuple[list[ast.AST], list[str]] | None:
        """``a.b.c`` -> ([Name a, Attribute a.b, Attribute a.b.c], ["a", "b", "c"])."""
        nodes, parts = [], []
        while isinstance(node, ast.Attribute):
            nodes.append(node)
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        nodes.append(node)
        parts.append(node.id)
        return nodes[::-1], parts[::-1]

    def resolve(self, node: ast.AST) -> tuple[tuple[str, ...], list[ast.AST], int] | None:
        """The canonical TensorFlow path of a chain, its nodes, and how many raw path elements
        the chain's root stands for."""
        found = self.chain(node)
        if found is None:
            return None
        nodes, parts = found
        module = self.aliases.get(parts[0])
        if module is None:
            return None
        raw = module + tuple(parts[1:])
        return raw, nodes, len(module)

    def node_for(self, raw: tuple[str, ...], nodes: list[ast.AST], root_len: int,
                 consumed: int) -> ast.AST:
        """The chain node covering the first ``consumed`` canonical elements."""
        shift = len(raw) - len(self.canonical(raw))
        index = consumed + shift - root_len
        return nodes[max(index, 0)]

    def estflow_target(self, canon: tuple[str, ...]) -> tuple[int, str] | None:
        """(canonical elements consumed, path in estflow.estimator) or None."""
        if canon[:2] == ("tensorflow", "estimator"):
            rest = canon[2:]
            if not rest:
                return 2, ""
            head = rest[0]
            if head == "experimental" and len(rest) > 1 and rest[1] in EARLY_STOPPING:
                return 4, EARLY_STOPPING[rest[1]]
            if head == "export":
                if len(rest) == 1:
                    return 3, "export"
                if rest[1] in EXPORT_NAMES:
                    return 4, f"export.{rest[1]}"
                return None
            if head in ESTIMATOR_NAMES:
                return 3, head
            surface = surface_target(rest)  # tpu, inputs, experimental, the rest of 2.15's
            return None if surface is None else (2 + surface[0], surface[1])
        if canon[:2] == ("tensorflow", "feature_column"):
            if len(canon) == 2:
                return 2, "feature_column"
            if canon[2] in FEATURE_COLUMN_NAMES:
                return 3, f"feature_column.{canon[2]}"
            return None
        if canon[:4] == ("tensorflow", "keras", "layers", "DenseFeatures"):
            return 4, "feature_column.DenseFeatures"
        if canon[:4] == ("tensorflow", "keras", "estimator", "model_to_estimator"):
            return 4, "model_to_estimator"
        return None

    def tf1_rnn(self, node: ast.AST, canon: tuple[str, ...], raw: tuple[str, ...], nodes,
                root_len: int) -> bool:
        """A TF 1 RNN cell or RNN function (Keras 3 removed ``tf.compat.v1.nn.rnn_cell``):
        estflow.estimator.rnn_cell's, or reported with the Keras replacement; True when
        ``canon`` is one."""
        if canon[:3] in (("tensorflow", "nn", "rnn_cell"), ("tensorflow", "contrib", "rnn")) \
                and len(canon) > 3:
            name, consumed = canon[3], 4
            shown = ".".join(("tf", "compat", "v1") * (canon[1] == "nn") or ("tf",)) + "." + \
                ".".join(canon[1:4])
        elif canon[:2] == ("tensorflow", "nn") and len(canon) > 2 and canon[2] in RNN_FUNCTIONS:
            name, consumed, shown = canon[2], 3, f"tf.compat.v1.nn.{canon[2]}"
            if raw != canon:  # spelled tf.compat.v1.nn.X: TF 2.21 has it
                return True
        else:
            return False
        if name in ENGINE_RNN_NAMES:
            covered = self.node_for(raw, nodes, root_len, consumed)
            new = self.emit_estflow(f"rnn_cell.{name}", None)
            old = self.original(covered)
            if self.replace(covered, new):
                self.note(node, "changed", f"{old} -> {new} (TF 1's RNN cells and functions; "
                          "tf.compat.v1.nn.rnn_cell is gone with Keras 3)")
            return True
        replacement = RNN_REPLACEMENTS.get(name, "the tf.keras.layers RNN layer of that kind")
        self.note(node, "could not", f"{shown}: Keras 3 has no TF 1 RNN cells; replace with "
                  f"{replacement}")
        return True

    def emit_estflow(self, path: str, root: str | None) -> str:
        """Text naming estflow's ``path``, through the chain's own root alias when it is one of
        the rewritten imports and covers ``path``."""
        if root is not None and root in self.estflow_aliases:
            base = self.estflow_aliases[root]
            if base == "" or path == base or path.startswith(base + "."):
                rest = path[len(base):].lstrip(".") if base else path
                return root + (f".{rest}" if rest else "")
        name = self.estimator_name()
        return name + (f".{path}" if path else "")

    def in_fstring(self, node: ast.AST) -> bool:
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, ast.JoinedStr):
                return True
        return False

    def outermost_chains(self) -> Iterable[ast.AST]:
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.Attribute):
                continue
            parent = self.parents.get(node)
            if isinstance(parent, ast.Attribute) and parent.value is node:
                continue
            if sys.version_info < (3, 12) and self.in_fstring(node):
                continue  # Python 3.11 gives no reliable positions inside f-strings
            yield node

    def rewrite_chains(self) -> None:
        for node in self.outermost_chains():
            if id(node) in self.claimed:
                continue
            resolved = self.resolve(node)
            if resolved is None:
                continue
            raw, nodes, root_len = resolved
            canon = self.canonical(raw)
            root = nodes[0].id
            shown = ".".join(("tf",) + canon[1:]) if canon[0] == "tensorflow" else ".".join(canon)
            target = self.estflow_target(canon)
            if target is not None:
                consumed, path = target
                covered = self.node_for(raw, nodes, root_len, consumed)
                new = self.emit_estflow(path, root)
                old = self.original(covered)
                if new != old and self.replace(covered, new):
                    self.note(node, "changed", f"{old} -> {new}")
                continue
            if canon[:2] == ("tensorflow", "estimator") and len(canon) > 2:
                if canon[2] == "inputs":
                    self.note(node, "could not", f"{shown}: estflow's engine has "
                              "only inputs.numpy_input_fn and inputs.pandas_input_fn")
                    continue
                what = ".".join(canon[2:4]) if canon[2] in ("experimental", "export") else canon[2]
                instead = replacement(canon[2:])
                self.note(node, "could not", f"tf.estimator.{what}: estflow's engine has no "
                          "such name (left as is)" + (f"; use {instead}" if instead else ""))
                continue
            if canon[:2] == ("tensorflow", "feature_column") and len(canon) > 2:
                self.note(node, "could not", f"tf.feature_column.{canon[2]}: estflow's feature "
                          "columns have no such name (left as is)")
                continue
            if canon[:3] == ("tensorflow", "python", "feature_column") and len(canon) > 4:
                self._private_column_class(node, canon, nodes, raw, root_len)
                continue
            if canon[:4] == ("tensorflow", "keras", "optimizers", "legacy") and len(canon) > 4:
                covered = self.node_for(raw, nodes, root_len, 5)
                legacy = self.node_for(raw, nodes, root_len, 4)
                new = self.original(legacy.value) + "." + canon[4]
                old = self.original(covered)
                if self.replace(covered, new):
                    self.note(node, "changed", f"{old} -> {new} (Keras 3 has no legacy "
                              "optimizers)")
                continue
            if canon[:2] == ("tensorflow", "train") and len(canon) > 2 and \
                    canon[2] in V1_TRAIN_HOOKS and raw != canon:
                covered = self.node_for(raw, nodes, root_len, 3)
                new = self.emit_estflow(canon[2], None)
                old = self.original(covered)
                if self.replace(covered, new):
                    self.note(node, "changed", f"{old} -> {new}")
                continue
            if canon[:2] == ("tensorflow", "distribute") and len(canon) > 2 and raw != canon:
                covered = self.node_for(raw, nodes, root_len, 2)
                new = f"{self.tf_name()}.distribute"
                old = self.original(covered)
                if self.replace(covered, new):
                    self.note(node, "changed", f"{old}.{'.'.join(canon[2:])} -> {new}."
                              f"{'.'.join(canon[2:])} (the engine takes TF 2 strategies)")
                continue
            if canon[:2] == ("tensorflow", "layers") and len(canon) > 2:
                if canon[2] in V1_LAYER_CLASSES:
                    covered = self.node_for(raw, nodes, root_len, 3)
                    new = f"{self.tf_name()}.keras.layers.{canon[2]}"
                    old = self.original(covered)
                    if self.replace(covered, new):
                        self.note(node, "changed", f"{old} -> {new} (tf.compat.v1.layers is "
                                  "gone in TF 2.16+)")
                else:
                    self.note(node, "could not", f"tf.compat.v1.layers.{canon[2]}: no Keras "
                              "equivalent is rewritten (tf.compat.v1.layers is gone in TF 2.16+);"
                              f" replace with tf.keras.layers' {canon[2]}")
                continue
            if self.tf1_rnn(node, canon, raw, nodes, root_len):
                continue

    # statements ------------------------------------------------------------------------------------

    def rewrite_statements(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign) and self._iterations_workaround(node):
                self.remove_statement(node, "the TF 2.15 workaround "
                                      f"`{_short(self.original(node), 90)}` (the engine keeps "
                                      "the global step)")
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                self._expression_call(node)
            elif isinstance(node, ast.Call) and _downcasting_replace(node) and not any(
                    k.arg == "inplace" for k in node.keywords):
                end = self.offset(node.end_lineno, node.end_col_offset)
                if self.edit(end, end, ".infer_objects()"):
                    self.note(node, "changed", f"{_short(self.original(node), 50)} -> "
                              "....infer_objects() (pandas 3 no longer infers the dtype of "
                              "what replace returns: ('male', 'female') -> (0, 1) stays object)")

    def _iterations_workaround(self, node: ast.Assign) -> bool:
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Attribute) or \
                node.targets[0].attr != "iterations":
            return False
        value = node.value
        if not isinstance(value, ast.Call):
            return False
        resolved = self.resolve(value.func)
        return resolved is not None and self.canonical(resolved[0]) in GLOBAL_STEP_FUNCS

    def _expression_call(self, stmt: ast.Expr) -> None:
        call = stmt.value
        resolved = self.resolve(call.func)
        if resolved is not None:
            canon = self.canonical(resolved[0])
            if len(canon) == 2 and canon[0] == "tensorflow" and canon[1] in GRAPH_MODE_SWITCHES:
                self.remove_statement(stmt, f"`{self.original(stmt)}` (the engine runs TF 2: "
                                      "eager plus tf.function)")
                return
        func = call.func
        inplace = [k for k in call.keywords if k.arg == "inplace"]
        if (isinstance(func, ast.Attribute) and func.attr in PANDAS_INPLACE
                and isinstance(func.value, ast.Subscript) and len(inplace) == 1
                and isinstance(inplace[0].value, ast.Constant) and inplace[0].value.value is True):
            target = self.render(func.value)
            args = [self.render(a) for a in call.args]
            args += [(f"{k.arg}=" if k.arg else "**") + self.render(k.value)
                     for k in call.keywords if k.arg != "inplace"]
            new = f"{target} = {target}.{func.attr}({', '.join(args)})"
            if _downcasting_replace(call):
                new += ".infer_objects()"
            old = self.original(stmt)
            if self.replace(stmt, new):
                self.note(stmt, "changed", f"{_short(old, 50)} -> {_short(new, 50)} (pandas 3: "
                          "copy-on-write makes a chained inplace call a no-op)")

    def remove_statement(self, stmt: ast.stmt, what: str) -> None:
        parent = self.parents.get(stmt)
        siblings = None
        for name in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(parent, name, None)
            if isinstance(block, list) and stmt in block:
                siblings = block
        start = self.offset(stmt.lineno, 0)
        end = self.line_starts[stmt.end_lineno] if stmt.end_lineno < len(self.line_starts) \
            else len(self.data)
        line_text = self.data[start:self.offset(stmt.lineno, stmt.col_offset)]
        rest = self.data[self.offset(stmt.end_lineno, stmt.end_col_offset):end].strip()
        alone = not line_text.strip() and (not rest or rest.startswith(b"#"))
        if siblings is not None and len(siblings) == 1:
            ok = self.replace(stmt, "pass")
        elif alone:
            ok = self.edit(start, end, "")
        else:
            ok = self.replace(stmt, "pass")
        if ok:
            self.note(stmt, "removed", what)

    # what cannot be migrated -----------------------------------------------------------------------

    def check_unsupported(self) -> None:
        check_keras(self)  # Keras 2 -> 3: v1 optimizers in compile, learning phase, strategies
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name != "EstimatorSpec":
                continue
            for keyword in node.keywords:
                if keyword.arg == "scaffold" and not _checkpoint_scaffold(keyword.value):
                    self.note(keyword.value, "could not", "EstimatorSpec(scaffold=...): the "
                              "engine takes only Scaffold(saver=tf.train.Checkpoint(...)) (it "
                              "initialises, saves and restores the model's variables itself)")

"""``estflow migrate``'s call rewrites (a mixin of :class:`.migrate._Migrator`): learning-rate
decays over the global step, tf.compat.v1 premade defaults, functional layers and TF 1 dataset
iterator methods. (``tf.estimator.inputs.numpy_input_fn``/``pandas_input_fn`` calls are plain
renames to ``estimator.inputs``: the engine's functions read what 2.15's queues read.)"""

from __future__ import annotations

import ast

from estflow.pipelines.migrate.tables import DECAY_RENAMES
from estflow.pipelines.migrate.tables import DECAY_STEP_PARAMS
from estflow.pipelines.migrate.tables import DECAYS
from estflow.pipelines.migrate.tables import GLOBAL_STEP_FUNCS
from estflow.pipelines.migrate.tables import V1_DNN_OPTIMIZER
from estflow.pipelines.migrate.tables import V1_SUM_CANNED
from estflow.pipelines.migrate.tables import short as _short
from estflow.pipelines.migrate.tf1 import LAYERS
from estflow.pipelines.migrate.tf1 import rewrite_layer_call


class CallRewrites:
    """Call handling of the migrator (``self`` is a :class:`.migrate._Migrator`)."""

    def call_kind(self, call: ast.Call) -> tuple[str, str] | None:
        resolved = self.resolve(call.func)
        if resolved is None:
            return None
        canon = self.canonical(resolved[0])
        if len(canon) == 3 and canon[:2] == ("tensorflow", "train") and canon[2] in DECAYS:
            return "decay", canon[2]
        if len(canon) == 3 and canon[:2] == ("tensorflow", "layers") and canon[2] in LAYERS:
            return "layer", canon[2]
        if len(canon) == 3 and canon[:2] == ("tensorflow", "estimator") and \
                canon[2] in V1_SUM_CANNED and resolved[0] != canon:
            return "v1_canned", canon[2]
        return None

    def claim_structural_calls(self) -> None:
        for node in ast.walk(self.tree):
            kind = self.call_kind(node) if isinstance(node, ast.Call) else None
            if kind is not None and kind[0] != "v1_canned":
                self.claimed.add(id(node.func))

    @staticmethod
    def bind(call: ast.Call, params: list[str]) -> dict[str, ast.AST] | None:
        """The call's arguments by parameter name; None with ``*args``/``**kwargs``/unknowns."""
        bound: dict[str, ast.AST] = {}
        if len(call.args) > len(params):
            return None
        for param, arg in zip(params, call.args, strict=False):
            if isinstance(arg, ast.Starred):
                return None
            bound[param] = arg
        for keyword in call.keywords:
            if keyword.arg is None or keyword.arg not in params or keyword.arg in bound:
                return None
            bound[keyword.arg] = keyword.value
        return bound

    def rewrite_calls(self) -> None:
        self._serving_placeholders()
        calls = [n for n in ast.walk(self.tree) if isinstance(n, ast.Call)]
        # innermost first, so an outer rewrite renders the inner ones
        calls.sort(key=lambda n: (n.end_lineno, n.end_col_offset, -n.lineno, -n.col_offset))
        for call in calls:
            kind = self.call_kind(call)
            if kind is not None:
                getattr(self, f"_call_{kind[0]}")(call, kind[1])
            elif self._iterator_method(call):
                func = call.func
                new = (f"{self.tf_name()}.compat.v1.data.{func.attr}"
                       f"({self.render(func.value)})")
                if self.replace(call, new):
                    self.note(call, "changed", f"dataset.{func.attr}() -> {_short(new, 60)} "
                              "(TF 2 datasets have no such method; the engine reads the "
                              "get_next() tensors as the dataset, the code after get_next() "
                              "run on every batch)")

    def _serving_placeholders(self) -> None:
        """``tf.placeholder(...)`` values of the feature dict given to
        ``build_raw_serving_input_receiver_fn`` -> ``tf.TensorSpec(...)``. That dict is built
        where the call is, eagerly on TF 2 (TF 1 programs built it in a graph, often after
        ``disable_v2_behavior()``, which migrate removes); the engine's function takes specs."""
        for call in ast.walk(self.tree):
            if not isinstance(call, ast.Call) or not call.args:
                continue
            resolved = self.resolve(call.func)
            if resolved is None or self.canonical(resolved[0])[-1:] != (
                    "build_raw_serving_input_receiver_fn",) or \
                    self.canonical(resolved[0])[:2] != ("tensorflow", "estimator"):
                continue
            for mapping in self._dicts_named(call.args[0], call):
                for value in mapping.values:
                    if isinstance(value, ast.Call):
                        self._placeholder_spec(value)

    def _dicts_named(self, node: ast.AST, at: ast.AST) -> list[ast.Dict]:
        """The dict literal ``node`` is, or those assigned to its name before ``at``."""
        if isinstance(node, ast.Dict):
            return [node]
        if not isinstance(node, ast.Name):
            return []
        return [stmt.value for stmt in ast.walk(self.tree)
                if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Dict)
                and stmt.lineno < at.lineno
                and any(isinstance(t, ast.Name) and t.id == node.id for t in stmt.targets)]

    def _placeholder_spec(self, call: ast.Call) -> None:
        resolved = self.resolve(call.func)
        if resolved is None or self.canonical(resolved[0]) != ("tensorflow", "placeholder"):
            return
        bound = self.bind(call, ["dtype", "shape", "name"])
        if bound is None or "dtype" not in bound:
            self.note(call, "could not", "tf.placeholder(...) given to "
                      "build_raw_serving_input_receiver_fn: arguments not understood; write "
                      "tf.TensorSpec(shape, dtype, name) (TF 2 runs it eagerly)")
            return
        args = ", ".join(f"{key}={self.render(bound[key])}" for key in ("shape", "dtype", "name")
                         if key in bound)
        new = f"{self.tf_name()}.TensorSpec({args})"
        if self.replace(call, new):
            self.note(call, "changed", f"tf.placeholder(...) -> {_short(new, 60)} (the serving "
                      "features are built eagerly on TF 2; the engine takes specs)")

    def _iterator_method(self, call: ast.Call) -> bool:
        """``<dataset>.make_one_shot_iterator()`` (TF 1's ``Dataset`` method)."""
        func = call.func
        return (isinstance(func, ast.Attribute) and not call.args and not call.keywords
                and func.attr in ("make_one_shot_iterator", "make_initializable_iterator")
                and self.resolve(func.value) is None)

    def _call_v1_canned(self, call: ast.Call, name: str) -> None:
        keywords = {k.arg for k in call.keywords}
        if "loss_reduction" in keywords:
            return
        if None in keywords or any(isinstance(a, ast.Starred) for a in call.args):
            self.note(call, "could not", f"tf.compat.v1.estimator.{name}(...): its default "
                      "loss_reduction (SUM) is estflow's only when given: pass "
                      "loss_reduction='sum'")
            return
        values = list(call.args) + [k.value for k in call.keywords]
        text = 'loss_reduction="sum"' + self._v1_dnn_optimizer(call, name)
        if values:
            last = max(values, key=lambda v: (v.end_lineno, v.end_col_offset))
            pos = self.offset(last.end_lineno, last.end_col_offset)
            text = ", " + text
        else:
            pos = self.offset(call.end_lineno, call.end_col_offset) - 1
        if self.edit(pos, pos, text):
            self.note(call, "changed", f"tf.compat.v1.estimator.{name}: added {text.lstrip(', ')}"
                      " (the TF 1 class's defaults; TF 2's and estflow's are sum_over_batch_size"
                      " and Keras Adagrad's 0.001)")

    def _v1_dnn_optimizer(self, call: ast.Call, name: str) -> str:
        """``, optimizer=<TF 1 Adagrad>`` for a TF 1 DNN class given no optimizer (at the TF 1
        class's default learning rate; TF 2's classes take Keras Adagrad's 0.001), else ``""``."""
        keyword, position, rate = V1_DNN_OPTIMIZER.get(name, (None, 0, ""))
        if keyword is None or len(call.args) > position:
            return ""
        if keyword in {k.arg for k in call.keywords}:
            return ""
        return (f", {keyword}={self.tf_name()}.compat.v1.train.AdagradOptimizer("
                f"learning_rate={rate})")

    def _call_decay(self, call: ast.Call, name: str) -> None:
        schedule, params = DECAYS[name]
        shown = f"tf.compat.v1.train.{name}"
        bound = self.bind(call, params)
        if bound is None:
            self.note(call, "could not", f"{shown}(...): arguments not understood")
            return
        step = next((bound[p] for p in DECAY_STEP_PARAMS if p in bound), None)
        if not self._is_global_step(step):
            self.note(call, "could not", f"{shown}(...): decays over something other than the "
                      "global step")
            return
        args = [f"{DECAY_RENAMES.get(p, p)}={self.render(bound[p])}" for p in params
                if p in bound and p not in DECAY_STEP_PARAMS]
        new = f"{self.tf_name()}.keras.optimizers.schedules.{schedule}({', '.join(args)})"
        if self.replace(call, new):
            self.note(call, "changed", f"{shown}(..., global_step) -> {_short(new, 60)} (the "
                      "optimizer's step drives it)")

    def _is_global_step(self, node: ast.AST | None) -> bool:
        """``get_global_step()``, or a name only ever assigned that call (TF 1 examples write
        ``global_step = tf.train.get_global_step()`` and pass the name)."""
        if isinstance(node, ast.Call):
            return not node.args and not node.keywords and \
                (r := self.resolve(node.func)) is not None and \
                self.canonical(r[0]) in GLOBAL_STEP_FUNCS
        if not isinstance(node, ast.Name):
            return False
        assigns = [a for a in ast.walk(self.tree) if isinstance(a, ast.Assign)
                   and any(isinstance(t, ast.Name) and t.id == node.id for t in a.targets)]
        return bool(assigns) and all(len(a.targets) == 1 and self._is_global_step(a.value)
                                     for a in assigns)

    def _call_layer(self, call: ast.Call, name: str) -> None:
        rewrite_layer_call(self, call, name)

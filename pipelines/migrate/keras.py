"""``estflow migrate``'s Keras 2 -> Keras 3 reports (used by :mod:`.migrate`; no TensorFlow
imported): TF 1 constructs around a Keras model that Keras 3 or the engine refuse, reported
with the replacement (the text is left as it was).

- ``model.compile(optimizer=tf.compat.v1.train.XOptimizer(...))``, directly or through a name
  assigned such a call: Keras 3 takes only Keras optimizers (Keras 2 wrapped a TF 1 one);
- ``tf.keras.backend.set_learning_phase(...)``: Keras 3 has no global learning phase (the
  engine calls the model with ``training=`` per mode);
- ``RunConfig(train_distribute=A(...), eval_distribute=B(...))`` with two strategy classes:
  the engine evaluates under the training strategy or on one device.
"""

from __future__ import annotations

import ast

__all__ = ["check_keras", "KERAS_OPTIMIZERS"]

# tf.compat.v1.train optimizers -> the Keras optimizer to compile with instead
KERAS_OPTIMIZERS = {
    "GradientDescentOptimizer": "tf.keras.optimizers.SGD(learning_rate)",
    "MomentumOptimizer": "tf.keras.optimizers.SGD(learning_rate, momentum=...)",
    "AdamOptimizer": "tf.keras.optimizers.Adam(learning_rate, epsilon=1e-8)",
    "AdagradOptimizer": "tf.keras.optimizers.Adagrad(learning_rate)",
    "AdadeltaOptimizer": "tf.keras.optimizers.Adadelta(learning_rate)",
    "RMSPropOptimizer": "tf.keras.optimizers.RMSprop(learning_rate)",
    "FtrlOptimizer": "tf.keras.optimizers.Ftrl(learning_rate)",
}


def _built(migrator, node: ast.AST | None, module: tuple[str, ...]) -> tuple[str, ...] | None:
    """The path under ``module`` of what a call builds (``tf.<module>.X(...)`` -> ``(X,)``)."""
    if not isinstance(node, ast.Call):
        return None
    resolved = migrator.resolve(node.func)
    if resolved is None:
        return None
    canon = migrator.canonical(resolved[0])
    if canon[:len(module)] == module and len(canon) > len(module):
        return canon[len(module):]
    return None


def _v1_optimizer(migrator, node: ast.AST | None) -> str | None:
    """The TF 1 optimizer class a call builds (``tf.compat.v1.train.XOptimizer(...)``)."""
    built = _built(migrator, node, ("tensorflow", "train"))
    return built[0] if built and len(built) == 1 and built[0].endswith("Optimizer") else None


def _assigned(tree: ast.AST) -> dict[str, list[ast.AST]]:
    """name -> the values assigned to it anywhere in the program."""
    values: dict[str, list[ast.AST]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    values.setdefault(target.id, []).append(node.value)
    return values


def _strategy(migrator, node: ast.AST | None) -> str | None:
    """The strategy class a call builds (``tf.distribute.X(...)``), or None."""
    built = _built(migrator, node, ("tensorflow", "distribute"))
    return ".".join(built) if built else None
    resolved = migrator.resolve(node.func)
    if resolved is None:
        return None
    canon = migrator.canonical(resolved[0])
    if canon[:2] == ("tensorflow", "distribute") and len(canon) > 2:
        return ".".join(canon[2:])
    return None


def check_keras(migrator) -> None:
    """Report the constructs the module docstring lists (``migrator``: migrate's _Migrator)."""
    assigned = _assigned(migrator.tree)
    for node in ast.walk(migrator.tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "compile":
            _compile(migrator, node, assigned)
            continue
        resolved = migrator.resolve(func)
        canon = migrator.canonical(resolved[0]) if resolved else ()
        if canon == ("tensorflow", "keras", "backend", "set_learning_phase"):
            migrator.note(node, "could not", "tf.keras.backend.set_learning_phase: Keras 3 has "
                          "no global learning phase; remove the call (the engine calls the "
                          "model with training=True when training, False otherwise)")
        elif canon[-1:] == ("RunConfig",):
            _run_config(migrator, node)


def _compile(migrator, call: ast.Call, assigned: dict[str, list[ast.AST]]) -> None:
    value = next((k.value for k in call.keywords if k.arg == "optimizer"), None)
    if value is None and call.args:
        value = call.args[0]
    candidates = [value]
    if isinstance(value, ast.Name):
        candidates = assigned.get(value.id, [])
    for candidate in candidates:
        name = _v1_optimizer(migrator, candidate)
        if name is not None:
            instead = KERAS_OPTIMIZERS.get(name, "the tf.keras.optimizers class of that name")
            migrator.note(call, "could not", f"compile(optimizer=tf.compat.v1.train.{name}): "
                          f"Keras 3 compiles only Keras optimizers; use {instead}")
            return


def _run_config(migrator, call: ast.Call) -> None:
    given = {k.arg: k.value for k in call.keywords}
    train = _strategy(migrator, given.get("train_distribute"))
    evaluate = _strategy(migrator, given.get("eval_distribute"))
    if train and evaluate and train != evaluate:
        migrator.note(given["eval_distribute"], "could not", f"RunConfig(eval_distribute="
                      f"{evaluate}) with train_distribute={train}: the engine evaluates "
                      "under the training strategy or on one device; pass the training "
                      "strategy or leave eval_distribute out")

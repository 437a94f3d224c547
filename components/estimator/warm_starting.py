"""Warm start: initialise a new model_dir's variables from another model's checkpoint
(tf.estimator's ``WarmStartSettings``), by variable name.

Variable names are the checkpoint names ``Estimator.get_variable_names()`` lists:

- ``store/model/NNN_<name>``: the model (what the model_fn's first trace creates), ``NNN``
  being its position and ``<name>`` the variable's own name (``000_kernel``,
  ``001_bias``, ``002_embeddings``, ...). The order is the model_fn's, so it is the same in
  every run of the same model_fn.
- ``store/train/NNN``: optimizer state created in the model_fn (a ``tf.compat.v1.train`` or
  Keras optimizer's slots, iteration, learning rate) and variables only a later TRAIN trace
  creates.
- ``optimizers/...``: the engine's optimizer state (slots such as Adagrad accumulators, and
  the iteration count). Warm-started only when ``vars_to_warm_start`` is a *list* with a regex
  matching ``"optimizers/"`` (``[".*"]`` does): then all of it, from an estflow checkpoint of
  the same model_fn (same optimizers, same variables), restored as one object graph; a source
  without optimizer state, or with different optimizers, is an error. Continuing a
  retraining schedule with it keeps Adagrad/Adam/FTRL step sizes where the last run left them.
- ``global_step`` is never warm-started: the new run counts from 0.

Warm starting happens once, when ``train`` first runs on a model_dir without a checkpoint;
afterwards the model_dir's own checkpoints win. The source may be an estflow checkpoint or
any TF checkpoint (a tf.estimator model's ``dnn/hiddenlayer_0/kernel`` names, say) with
``var_name_to_prev_var_name`` mapping names across.

Example::

    settings = WarmStartSettings("/models/last_week",            # a model_dir or a checkpoint
                                 vars_to_warm_start="store/model/00[01]_.*",
                                 var_name_to_prev_var_name={
                                     "store/model/000_kernel": "dnn/hiddenlayer_0/kernel"})
    est = Estimator(model_fn, "/models/this_week", warm_start_from=settings)
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf

__all__ = ["VocabInfo", "WarmStartSettings", "as_settings", "warm_start"]

_VALUE_SUFFIX = "/.ATTRIBUTES/VARIABLE_VALUE"
_GROUPS = ("store/model/", "store/train/")


@dataclasses.dataclass(frozen=True)
class VocabInfo:
    """How to remap a vocabulary-indexed variable (embedding rows) when the vocabulary changed.

    Args:
        new_vocab: the current vocabulary file (one token per line).
        new_vocab_size: how many of its tokens the variable indexes.
        num_oov_buckets: OOV rows after the vocabulary rows (initialised, not copied).
        old_vocab: the vocabulary file the source checkpoint was trained with.
        old_vocab_size: how many old tokens to use (-1: all).
        backup_initializer: ``(shape, dtype) -> value`` for rows with no old counterpart
            (None: keep the new variable's initial values).
        axis: 0 when rows are vocabulary entries, 1 for columns.
    """

    new_vocab: str
    new_vocab_size: int
    num_oov_buckets: int
    old_vocab: str
    old_vocab_size: int = -1
    backup_initializer: Callable | None = None
    axis: int = 0

    def __post_init__(self) -> None:
        if self.axis not in (0, 1):
            raise ValueError(f"Received an invalid value for `axis`, expected 0 or 1. "
                             f"Received: axis={self.axis!r}")
        if self.new_vocab_size <= 0 or self.num_oov_buckets < 0:
            raise ValueError("Expected new_vocab_size > 0 and num_oov_buckets >= 0; received "
                             f"new_vocab_size={self.new_vocab_size}, "
                             f"num_oov_buckets={self.num_oov_buckets}")


@dataclasses.dataclass(frozen=True)
class WarmStartSettings:
    """What to warm-start from, and which variables.

    Args:
        ckpt_to_initialize_from: a checkpoint path prefix, or a directory (a model_dir): its
            latest checkpoint.
        vars_to_warm_start: a regex (matched from the start of the name) selecting
            *trainable* variables (default ``".*"``: all of them); a list of regexes selecting
            any model variable (non-trainable ones too, e.g. batch-norm statistics) and, when
            one matches ``"optimizers/"``, the optimizer state; None: none.
        var_name_to_vocab_info: ``{variable name: VocabInfo}`` for vocabulary remapping.
        var_name_to_prev_var_name: ``{variable name: name in the source checkpoint}``.

    Example:
        >>> WarmStartSettings("/tmp/prev").vars_to_warm_start
        '.*'
    """

    ckpt_to_initialize_from: str
    vars_to_warm_start: str | list[str] | tuple[str, ...] | None = ".*"
    var_name_to_vocab_info: Mapping[str, VocabInfo] | None = None
    var_name_to_prev_var_name: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        path = self.ckpt_to_initialize_from
        if not isinstance(path, (str, os.PathLike)) or not str(path):
            raise ValueError("Received an invalid value for `ckpt_to_initialize_from`, expected "
                             f"a checkpoint path or directory. Received: {path!r}")
        object.__setattr__(self, "ckpt_to_initialize_from", os.fspath(path))
        wanted = self.vars_to_warm_start
        if isinstance(wanted, list):
            object.__setattr__(self, "vars_to_warm_start", tuple(wanted))
        elif wanted is not None and not isinstance(wanted, (str, tuple)):
            raise TypeError("Expected vars_to_warm_start to be a regex, a list of regexes or "
                            f"None; received {type(wanted).__name__}")


def as_settings(value: Any) -> WarmStartSettings | None:
    """``Estimator(warm_start_from=...)``: a path, a WarmStartSettings, or None."""
    if value is None or isinstance(value, WarmStartSettings):
        return value
    if isinstance(value, (str, os.PathLike)):
        return WarmStartSettings(os.fspath(value))
    raise TypeError("Expected warm_start_from to be a checkpoint path, a directory or a "
                    f"WarmStartSettings; received {type(value).__name__}")


def _checkpoint_path(source: str) -> str:
    path = tf.train.latest_checkpoint(source) if os.path.isdir(source) else source
    if not path:
        raise ValueError(f"Expected a checkpoint to warm-start from in {source}; the directory "
                         "has none")
    try:
        tf.train.load_checkpoint(path)
    except (tf.errors.OpError, ValueError) as err:
        raise ValueError(f"Expected a checkpoint to warm-start from at {path}; it cannot be "
                         f"read ({type(err).__name__})") from None
    return path


def _selected(variables: Mapping[str, tf.Variable], wanted) -> dict[str, tf.Variable]:
    candidates = {n: v for n, v in variables.items() if n.startswith(_GROUPS)}
    if wanted is None:
        return {}
    if isinstance(wanted, str):
        return {n: v for n, v in candidates.items() if v.trainable and re.match(wanted, n)}
    return {n: v for n, v in candidates.items() if any(re.match(w, n) for w in wanted)}


def _source_key(names: set[str], prev: str) -> str | None:
    for key in (prev + _VALUE_SUFFIX, prev):
        if key in names:
            return key
    return None


def _wants_optimizers(wanted) -> bool:
    return isinstance(wanted, tuple) and any(re.match(w, "optimizers/") for w in wanted)


def _warm_start_optimizers(optimizers: tf.Module, path: str, names: set[str]) -> None:
    """Restore the engine's whole optimizer state from ``path`` by object graph."""
    if not any(n.startswith("optimizers/") for n in names):
        raise ValueError(f"Cannot warm-start the optimizer state from {path}: expected an "
                         "estflow checkpoint with optimizer state (optimizers/...); it has "
                         "none. Drop the regex matching 'optimizers/' from vars_to_warm_start "
                         "to warm-start the model only")
    status = tf.train.Checkpoint(optimizers=optimizers).read(path)
    try:
        status.assert_existing_objects_matched()
    except AssertionError as err:
        raise ValueError(f"Cannot warm-start the optimizer state from {path}: expected the "
                         "same optimizers and variables as this model_fn's; "
                         f"{str(err).splitlines()[0]}") from None
    status.expect_partial()


def warm_start(variables: Mapping[str, tf.Variable], settings: WarmStartSettings,
               optimizers: tf.Module | None = None) -> str:
    """Assign the selected ``variables`` (by checkpoint name) from the settings' checkpoint,
    and the engine's ``optimizers`` state when selected; returns that checkpoint's path.

    Raises:
        ValueError: a selected variable (or a mapped name) is not in the checkpoint, shapes
            differ, or mapping keys name no selected variable; the message lists them all.
            Optimizer state selected but absent from, or different in, the checkpoint.
    """
    path = _checkpoint_path(settings.ckpt_to_initialize_from)
    reader = tf.train.load_checkpoint(path)
    shapes = reader.get_variable_to_shape_map()
    selected = _selected(variables, settings.vars_to_warm_start)
    renames = dict(settings.var_name_to_prev_var_name or {})
    vocabs = dict(settings.var_name_to_vocab_info or {})
    unused = sorted((set(renames) | set(vocabs)) - set(selected))
    if unused:
        raise ValueError(f"Expected var_name_to_prev_var_name / var_name_to_vocab_info to name "
                         f"variables selected by vars_to_warm_start; these are not: {unused}. "
                         f"Selected: {sorted(selected)}")
    missing, mismatched, plan = [], [], []
    for name, var in sorted(selected.items()):
        key = _source_key(set(shapes), renames.get(name, name))
        if key is None:
            missing.append(name if name not in renames else f"{name} (as {renames[name]})")
        elif name not in vocabs and list(shapes[key]) != var.shape.as_list():
            mismatched.append(f"{name} {var.shape.as_list()} vs {renames.get(name, name)} "
                              f"{list(shapes[key])}")
        else:
            plan.append((var, key, vocabs.get(name)))
    if missing or mismatched:
        available = sorted(k[:-len(_VALUE_SUFFIX)] if k.endswith(_VALUE_SUFFIX) else k
                           for k in shapes if k != "_CHECKPOINTABLE_OBJECT_GRAPH")
        problems = ([f"not found: {', '.join(missing)}"] if missing else []) + (
            [f"shape mismatches: {'; '.join(mismatched)}"] if mismatched else [])
        raise ValueError(f"Cannot warm-start from {path}, expected the selected variables "
                         f"in it ({' / '.join(problems)}). The checkpoint has: "
                         f"{', '.join(available)}")
    for var, key, vocab in plan:
        value = reader.get_tensor(key)
        var.assign(value if vocab is None else _remap(var, value, vocab))
    if optimizers is not None and _wants_optimizers(settings.vars_to_warm_start):
        _warm_start_optimizers(optimizers, path, set(shapes))
    return path


def _read_vocab(path: str, size: int) -> list[str]:
    with tf.io.gfile.GFile(path) as f:
        tokens = [line.rstrip("\n") for line in f]
    return tokens if size is None or size < 0 else tokens[:size]


def _remap(var: tf.Variable, old: np.ndarray, vocab: VocabInfo) -> np.ndarray:
    """The variable's value with each new-vocabulary row taken from the old row of the same
    token; other rows (new tokens, OOV buckets) from ``backup_initializer`` or as they are."""
    current = var.numpy()
    if vocab.backup_initializer is not None:
        current = np.asarray(vocab.backup_initializer(current.shape, var.dtype))
    new, old_tokens = (np.moveaxis(a, vocab.axis, 0) for a in (current.copy(), old))
    index = {t: i for i, t in enumerate(_read_vocab(vocab.old_vocab, vocab.old_vocab_size))}
    for row, token in enumerate(_read_vocab(vocab.new_vocab, vocab.new_vocab_size)):
        source = index.get(token)
        if source is not None and source < len(old_tokens) and row < len(new):
            new[row] = old_tokens[source]
    return np.moveaxis(new, 0, vocab.axis)

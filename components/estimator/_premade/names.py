"""tf.estimator 2.15's variable names for the premade Estimators' variables.

Programs print and test ``est.get_variable_names()`` / ``est.get_variable_value(name)`` with
tf.estimator's names (``linear/linear_model/age/weights``, ``dnn/hiddenlayer_0/kernel``). The
engine stores a model's variables as ``store/model/<NNN>_<name>`` (creation order, see
:mod:`..warm_starting`); for a premade Estimator each such name also answers to tf.estimator's
(:func:`tf_estimator_aliases`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["tf_estimator_aliases"]

_MODEL = re.compile(r"store/model/\d+_(?P<name>.+)")
# the engine's variable name (after NNN_) -> tf.estimator 2.15's
_RULES = (
    (re.compile(r"linear_bias_weights"), "linear/linear_model/bias_weights"),
    (re.compile(r"linear_(.+)_weights"), r"linear/linear_model/\1/weights"),
    (re.compile(r"hiddenlayer_(\d+)_(kernel|bias)"), r"dnn/hiddenlayer_\1/\2"),
    (re.compile(r"batchnorm_(\d+)/(gamma|beta|moving_mean|moving_variance)"),
     r"dnn/hiddenlayer_\1/batchnorm_\1/\2"),
    (re.compile(r"logits_(kernel|bias)"), r"dnn/logits/\1"),
    (re.compile(r"bias"), "baseline/bias"),
)


def tf_estimator_aliases(names: Iterable[str]) -> dict[str, str]:
    """``{tf.estimator name: engine name}`` for the model variables among ``names``.

    Example:
        >>> tf_estimator_aliases(["store/model/000_hiddenlayer_0_kernel", "global_step"])
        {'dnn/hiddenlayer_0/kernel': 'store/model/000_hiddenlayer_0_kernel'}
    """
    aliases = {}
    for name in names:
        found = _MODEL.fullmatch(name)
        if found is None:
            continue
        for pattern, alias in _RULES:
            if pattern.fullmatch(found["name"]):
                aliases[pattern.sub(alias, found["name"])] = name
                break
    return aliases

"""A loaded model's callable signature (:class:`Signature`) and the method names a
SignatureDef declares (:data:`PREDICT`, :data:`CLASSIFY`, :data:`REGRESS`): what both ways of
loading a version build (:mod:`.models`' ``tf.saved_model.load``, :mod:`.session_model`'s TF 1
Session) and what the inference core (:class:`~.models.ServedModel`) calls. :mod:`.models`
re-exports them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import tensorflow as tf

__all__ = ["Signature", "PREDICT", "CLASSIFY", "REGRESS"]

PREDICT, CLASSIFY, REGRESS = (f"tensorflow/serving/{m}" for m in ("predict", "classify",
                                                                  "regress"))


@dataclasses.dataclass(frozen=True)
class Signature:
    """One callable signature of a loaded SavedModel.

    Attributes:
        function: called with the inputs as keyword arguments (tensors or arrays); returns
            output name -> tensor or array.
        inputs: input name -> TensorSpec (the keyword arguments of ``function``), sorted. A
            spec of unknown rank (the Session path) means the tensor is fed as sent.
        outputs: output names, sorted.
        method_name: the SignatureDef's method name (:data:`PREDICT`, :data:`CLASSIFY`, ...).
    """

    name: str
    function: Callable[..., dict[str, Any]]
    inputs: dict[str, tf.TensorSpec]
    outputs: tuple[str, ...]
    method_name: str = PREDICT

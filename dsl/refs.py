"""References to user functions that travel inside a JSON spec: ``module:qualname`` (+ file).

A compiled pipeline cannot carry Python functions; it carries where to import them from. The
steps (components) resolve a reference in their own process, so declaring or compiling a
pipeline never runs user code that needs TensorFlow.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable

from estflow.dsl.errors import DslError
from estflow.dsl.serialization import serializable

__all__ = ["CallableRef", "as_ref"]


@serializable
@dataclasses.dataclass(frozen=True)
class CallableRef:
    """Where to find a function: ``module`` and ``name`` (a qualname), and optionally the
    ``file`` the module was loaded from when it is not importable by name (a user script).

    Declarations that take a function (``CustomModel.model_fn``, ``Derive.fn``) accept the
    function itself, a ``"package.module:function"`` string or a ``CallableRef``, and store a
    ``CallableRef``; nothing is imported until a step resolves it.

    Args:
        module: the module's import name.
        name: the function's qualified name inside the module (a module-level function).
        file: the ``.py`` file to load the module from, for a script that is not on the
            import path (None: import ``module`` by name).

    Example:
        >>> import estflow.dsl as ef
        >>> ref = ef.CallableRef.parse("my_models.wide:model_fn")
        >>> ref, str(ref)
        (CallableRef(module='my_models.wide', name='model_fn', file=None), 'my_models.wide:model_fn')
    """

    module: str
    name: str
    file: str | None = None

    def __post_init__(self) -> None:
        for field in ("module", "name"):
            value = getattr(self, field)
            if not isinstance(value, str) or not value:
                raise DslError(field, "a non-empty string", value)
        if "<" in self.name:
            raise DslError("name", "a module-level function (not a lambda or a nested function)",
                           self.name)

    @classmethod
    def parse(cls, text: str) -> CallableRef:
        """Parse ``"package.module:function"``."""
        if not isinstance(text, str) or text.count(":") != 1:
            raise DslError("ref", "a string 'package.module:function'", text)
        module, name = text.split(":")
        return cls(module=module, name=name)

    def __str__(self) -> str:
        return f"{self.module}:{self.name}"


def as_ref(value: Callable | str | CallableRef, path: str) -> CallableRef:
    """Turn a function, a ``"module:function"`` string or a ref into a :class:`CallableRef`."""
    if isinstance(value, CallableRef):
        return value
    if isinstance(value, str):
        try:
            return CallableRef.parse(value)
        except DslError as err:
            raise DslError(path, err.expected, value) from None
    if callable(value) and hasattr(value, "__module__") and hasattr(value, "__qualname__"):
        if "<" in value.__qualname__:
            raise DslError(path, "a module-level function (lambdas and nested functions cannot "
                           "be imported by a pipeline step)", value.__qualname__)
        module = sys.modules.get(value.__module__)
        file = getattr(module, "__estflow_file__", None)
        return CallableRef(module=value.__module__, name=value.__qualname__, file=file)
    raise DslError(path, "a function or a 'package.module:function' string", value)

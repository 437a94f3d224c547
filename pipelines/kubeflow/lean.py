"""What compiling needs of kfp (2.17), without what it does not: ``estflow compile`` in a
fraction of a second less.

* :func:`import_kfp`: ``import kfp`` runs kfp's package ``__init__``, which imports the API
  client (``kfp.Client``: kfp_server_api, the kubernetes client, google-auth; ~0.6 s, half
  of a compile) although compiling never calls it. kfp skips those imports when
  ``_KFP_RUNTIME=true`` (what its tasks' containers set); :func:`import_kfp` imports the
  package so, restores the environment, and gives the package a module ``__getattr__`` that
  imports ``kfp.Client``, ``kfp.client``, ``kfp.components`` and ``kfp.dsl`` on first use, so
  later code (``estflow submit``'s ``kfp.Client``) sees the package as usual. ``kfp.dsl`` is
  imported after the environment is restored, so it has all its compile-time names. Likewise
  kfp-kubernetes is imported without the kubernetes client it never uses at module level.
* :func:`install`: kfp's ``PipelineTask`` setters (cpu, memory, accelerator, ...) each call
  ``inspect.stack()`` only to name themselves in an error message; that reads the source file
  of every frame on the stack, ~0.05 s a call, 14 calls for the taxi example. The patched
  check names the caller from its frame, the same name, without reading files.
* :func:`load_all`: YAML documents through libyaml's safe loader when PyYAML has it (the
  same objects as ``yaml.safe_load_all``, ~10x faster on a compiled pipeline).
"""

from __future__ import annotations

import importlib
import os
import sys
import types

import yaml

__all__ = ["import_kfp", "install", "load_all"]

_RUNTIME_ENV = "_KFP_RUNTIME"
_LAZY = {"client": "kfp.client", "components": "kfp.components", "dsl": "kfp.dsl"}


def import_kfp() -> None:
    """Import the ``kfp`` package without its API client (a no-op once kfp is imported)."""
    if "kfp" in sys.modules:
        return
    before = os.environ.get(_RUNTIME_ENV)
    os.environ[_RUNTIME_ENV] = "true"
    try:
        kfp = importlib.import_module("kfp")
    finally:
        if before is None:
            del os.environ[_RUNTIME_ENV]
        else:
            os.environ[_RUNTIME_ENV] = before

    def __getattr__(name: str):  # noqa: N807 - the module's PEP 562 hook
        if name == "Client":
            return importlib.import_module("kfp.client").Client
        if name in _LAZY:
            return importlib.import_module(_LAZY[name])
        raise AttributeError(f"module 'kfp' has no attribute {name!r}")

    kfp.__getattr__ = __getattr__
    importlib.import_module("kfp.dsl")
    _import_kfp_kubernetes()


class _Deferred(types.ModuleType):
    """A module imported on its first attribute access."""

    def __getattr__(self, name: str):
        return getattr(importlib.import_module(self.__name__), name)


def _import_kfp_kubernetes() -> None:
    """Import kfp-kubernetes without the kubernetes client (~0.7 s): its ``node_affinity``
    imports ``kubernetes.client`` at module level, but uses the one it imports again inside
    ``add_node_affinity``. While kfp.kubernetes loads, ``kubernetes`` is a stand-in whose
    ``client`` imports the real one on first use; the stand-in is removed afterwards."""
    if "kfp.kubernetes" in sys.modules or "kubernetes" in sys.modules:
        return
    stand_in = types.ModuleType("kubernetes")
    stand_in.client = _Deferred("kubernetes.client")
    sys.modules["kubernetes"] = stand_in
    try:
        importlib.import_module("kfp.kubernetes")
    finally:
        if sys.modules.get("kubernetes") is stand_in:
            del sys.modules["kubernetes"]


def install() -> None:
    """``PipelineTask._ensure_container_spec_exists`` without ``inspect.stack()``."""
    from kfp.dsl import pipeline_task  # noqa: PLC0415

    task = pipeline_task.PipelineTask
    if getattr(task._ensure_container_spec_exists, "_estflow_lean", False):  # noqa: SLF001
        return

    def _ensure_container_spec_exists(self) -> None:
        if self.container_spec is None:
            caller_method_name = sys._getframe(1).f_code.co_name  # noqa: SLF001
            raise ValueError(
                f"{caller_method_name} can only be used on single-step components, not "
                "pipelines used as components, or special components like importers.")

    _ensure_container_spec_exists._estflow_lean = True
    task._ensure_container_spec_exists = _ensure_container_spec_exists  # noqa: SLF001


def load_all(text: str) -> list:
    """``list(yaml.safe_load_all(text))``, with libyaml's loader when available."""
    return list(yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))

"""One loaded transform graph per SavedModel in a job, not one per stage that applies it.

tf.Transform (1.21) gives every ParDo that runs a SavedModel (``_RunMetaGraphDoFn``) its own
``shared.Shared()`` handle, so a job that transforms the train split (inside
``AnalyzeAndTransformDataset``) and then the eval split (``TransformDataset``) with the same
transform_fn loads that SavedModel twice: ~0.2-0.3 s per load on the taxi example, a load that
restores the same functions and initializes the same vocabulary tables. Within
:func:`shared_graph_states`, the loaded state (``_GraphStateV2``: the restored functions and
tables, read-only once loaded, and already shared across threads by tf.Transform's own
``Shared`` handle) is reused by every DoFn in this process that asks for the same SavedModel
with the same inputs and excluded outputs. Outside it (a remote worker, another job) nothing
changes; the states are dropped when the block ends.
"""

from __future__ import annotations

import contextlib
import threading

__all__ = ["shared_graph_states"]

_lock = threading.Lock()
_states: dict | None = None


def _key(dofn, saved_model_dir: str):
    return (saved_model_dir, bool(dofn._use_tf_compat_v1),  # noqa: SLF001
            tuple(sorted(dofn._get_input_tensor_names())),  # noqa: SLF001
            tuple(dofn._exclude_outputs), repr(dofn._tf_config))  # noqa: SLF001


@contextlib.contextmanager
def shared_graph_states():
    """Within the block, DoFns of this process loading the same transform graph share it."""
    global _states
    from tensorflow_transform.beam import impl

    cls = impl._RunMetaGraphDoFn  # noqa: SLF001
    original = cls.__dict__["_make_graph_state"]

    def make_graph_state(self, saved_model_dir):
        states = _states
        if states is None:
            return original(self, saved_model_dir)
        key = _key(self, saved_model_dir)
        with _lock:
            state = states.get(key)
            if state is None:
                state = states[key] = original(self, saved_model_dir)
        return state

    with _lock:
        _states = {}
    cls._make_graph_state = make_graph_state
    try:
        yield
    finally:
        cls._make_graph_state = original
        with _lock:
            _states = None

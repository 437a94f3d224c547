"""The transform step's speed-ups change no result: Beam's memoized signature inspection
returns what Beam computes, and one transform graph per SavedModel is loaded in a job."""

import functools

import apache_beam as beam
import pytest
from apache_beam.transforms import core
from apache_beam.transforms import userstate
from apache_beam.typehints import decorators

from estflow.components._runtime import beam_signatures


class _Stateful(beam.DoFn):
    STATE = userstate.BagStateSpec("seen", beam.coders.VarIntCoder())

    def process(self, element, seen=beam.DoFn.StateParam(STATE), key=None):  # noqa: B008
        yield element


def _plain(a, b=2, *rest, c=3, **kw):
    return a


@pytest.fixture(scope="module")
def uncached():
    """Beam's own functions, before the cache replaces them."""
    return (getattr(decorators.get_signature, "__wrapped_compute__", decorators.get_signature),
            core.get_function_args_defaults)


def test_memoized_signatures_equal_beams(uncached):
    get_signature, _ = uncached
    beam_signatures.install()
    dofn = _Stateful()
    for f in (_plain, dofn.process, _Stateful.process, functools.partial(_plain, 1), len,
              str.upper):
        assert decorators.get_signature(f) == get_signature(f)
        assert core.get_signature(f) == get_signature(f)
        assert decorators.get_signature(f) == get_signature(f)  # from the cache
    # A bound method lacks the first parameter; the function keeps it (separate entries).
    assert list(core.get_signature(dofn.process).parameters)[0] == "element"
    assert list(core.get_signature(_Stateful.process).parameters)[0] == "self"


def test_memoized_argument_lists_are_copies():
    beam_signatures.install()
    args, defaults = core.get_function_args_defaults(_plain)
    assert (args, defaults) == (["a", "b"], [2])
    args.append("mutated")
    assert core.get_function_args_defaults(_plain)[0] == ["a", "b"]


def test_state_specs_of_a_dofn_are_still_found():
    beam_signatures.install()
    state, timers = userstate.get_dofn_specs(_Stateful())
    assert [s.name for s in state] == ["seen"] and not timers
    assert userstate.is_stateful_dofn(_Stateful())
    assert not userstate.is_stateful_dofn(beam.DoFn())


def test_a_graph_is_loaded_once_per_saved_model_within_the_block(monkeypatch):
    from tensorflow_transform.beam import impl

    from estflow.components.transform._graph_states import shared_graph_states

    loads = []
    monkeypatch.setattr(impl._RunMetaGraphDoFn, "_make_graph_state",
                        lambda self, path: loads.append(path) or object())

    class Fn:  # the attributes the key reads, as a _RunMetaGraphDoFn has them
        _use_tf_compat_v1, _exclude_outputs, _tf_config = False, [], None

        def _get_input_tensor_names(self):
            return {"a", "b"}

    make = impl._RunMetaGraphDoFn._make_graph_state
    with shared_graph_states():
        first = impl._RunMetaGraphDoFn._make_graph_state(Fn(), "/m/final")
        assert impl._RunMetaGraphDoFn._make_graph_state(Fn(), "/m/final") is first
        other = impl._RunMetaGraphDoFn._make_graph_state(Fn(), "/m/phase0")
        assert other is not first
    assert loads == ["/m/final", "/m/phase0"]
    assert impl._RunMetaGraphDoFn._make_graph_state is make  # restored
    impl._RunMetaGraphDoFn._make_graph_state(Fn(), "/m/final")
    assert loads == ["/m/final", "/m/phase0", "/m/final"]  # outside: no sharing

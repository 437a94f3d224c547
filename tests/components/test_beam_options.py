"""The options of an in-process Beam pipeline (components/_runtime/beam.py ``LocalOptions``):
each view is made once, and is still a live window on the options' values.

Real Beam, in memory: the views, the type checks that ask for them on every transform, a
pickle round trip, and a small pipeline's results under both kinds of options.
"""

from __future__ import annotations

import pickle

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import SetupOptions
from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.options.pipeline_options import TypeOptions
from apache_beam.testing.util import assert_that
from apache_beam.testing.util import equal_to
from apache_beam.typehints.decorators import TypeCheckError
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from estflow.components._runtime import beam as runtime_beam
from estflow.components._runtime.beam import LocalOptions


def test_a_local_pipeline_gets_local_options_and_a_named_runner_gets_beams():
    local = runtime_beam.new_pipeline(["--direct_num_workers=1"])
    assert isinstance(local.options, LocalOptions)
    assert local.options.view_as(beam.options.pipeline_options.DirectOptions) \
        .direct_num_workers == 1
    named = runtime_beam.new_pipeline(["--runner=PortableRunner",
                                       "--job_endpoint=localhost:1"])
    assert type(named.options) is PipelineOptions


def test_views_are_made_once_and_stay_live(monkeypatch):
    made = []
    plain_view_as = PipelineOptions.view_as

    def counting(self, cls):
        made.append(cls)
        return plain_view_as(self, cls)

    monkeypatch.setattr(PipelineOptions, "view_as", counting)
    options = LocalOptions(["--type_check_strictness=ALL_REQUIRED", "--save_main_session"])
    first = options.view_as(TypeOptions)
    assert first.type_check_strictness == "ALL_REQUIRED"
    assert options.view_as(TypeOptions) is first
    assert made == [TypeOptions]
    # A value written through one view is read through every other view and the options.
    options.view_as(SetupOptions).save_main_session = False
    assert not options.view_as(SetupOptions).save_main_session
    first.pipeline_type_check = False
    assert options.view_as(TypeOptions).pipeline_type_check is False
    assert options.get_all_options()["pipeline_type_check"] is False
    options.view_as(StandardOptions).runner = "FnApiRunner"
    assert options.get_all_options()["runner"] == "FnApiRunner"
    assert made == [TypeOptions, SetupOptions, StandardOptions]


def test_the_view_cache_is_not_pickled_and_comes_back_after():
    options = LocalOptions(["--direct_num_workers=3", "--no_pipeline_type_check"])
    options.view_as(TypeOptions)
    state = options.__getstate__()
    assert "_views" not in state
    again = pickle.loads(pickle.dumps(options))
    assert again.get_all_options() == options.get_all_options()
    assert again.view_as(TypeOptions).pipeline_type_check is False
    assert again.view_as(TypeOptions) is again.view_as(TypeOptions)


def _typed_pipeline(options: PipelineOptions) -> None:
    @beam.typehints.with_input_types(int)
    @beam.typehints.with_output_types(int)
    def double(x):
        return 2 * x

    with beam.Pipeline(runner=runtime_beam.FnApiRunner(), options=options) as p:
        _ = p | beam.Create(["a", "b"]) | beam.Map(double)


@pytest.mark.parametrize("kind", [PipelineOptions, LocalOptions])
def test_type_checks_still_run_and_their_option_is_still_read(kind):
    with pytest.raises(TypeCheckError, match="double"):
        _typed_pipeline(kind([]))
    _typed_pipeline(kind(["--no_pipeline_type_check"]))  # the check off: "aa", "bb"


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(-5, 5)), max_size=30))
def test_a_pipeline_gives_the_same_results_with_local_options(rows):
    """The results of a keyed combine, a typed map and a flatten, checked against Python's own
    computation of them, under Beam's options and under LocalOptions."""
    sums: dict[str, int] = {}
    for key, value in rows:
        sums[key] = sums.get(key, 0) + value
    expected = sorted((k, 3 * v) for k, v in sums.items()) + [("n", len(rows))]

    for kind in (PipelineOptions, LocalOptions):
        with beam.Pipeline(runner=runtime_beam.FnApiRunner(), options=kind([])) as p:
            data = p | beam.Create(rows)
            summed = (data | beam.CombinePerKey(sum)
                      | beam.MapTuple(lambda k, v: (k, 3 * v)).with_output_types(
                          tuple[str, int]))
            count = data | beam.combiners.Count.Globally() | beam.Map(lambda n: ("n", n))
            assert_that((summed, count) | beam.Flatten(), equal_to(expected))

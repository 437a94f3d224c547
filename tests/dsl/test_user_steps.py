"""User steps as declarations (estflow.dsl.steps): a decorated function's signature becomes the
step's artifacts and parameters, checked when it is declared, and a Pipeline refuses every bad
place of its steps in the DAG at once, each error naming the step's field, what was expected
and what was received. Graphs of steps are also generated (hypothesis) and the cycle check is
compared with a reference (reachability by repeated squaring)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

import estflow.dsl as ef
from estflow.dsl.steps import Port
from estflow.dsl.steps import UserStep
from estflow.dsl.steps import graph_errors
from estflow.pipelines import loader
from tests.dsl.user_steps_pkg import signatures
from tests.dsl.user_steps_pkg import steps as user


@pytest.fixture(scope="module")
def taxi() -> ef.Pipeline:
    return loader.load("estflow.pipelines.examples.taxi").pipeline


def _with(pipeline: ef.Pipeline, *steps, **changes) -> ef.Pipeline:
    return dataclasses.replace(pipeline, steps=steps, **changes)


def _paths(err: ef.DslErrors) -> list[str]:
    return [e.path for e in err.errors]


def test_the_signature_makes_the_ports_parameters_and_result():
    declared = user.business_check(floor=0.7)
    assert declared.inputs == (Port("evaluation", "Evaluation"),)
    assert declared.outputs == (Port("report", "Markdown"),)
    assert declared.arguments() == {"floor": 0.7}
    assert declared.returns == ("auc", "ok")
    assert declared.fn == ef.CallableRef("tests.dsl.user_steps_pkg.steps", "business_check")
    assert user.business_check.declaration().arguments() == {"floor": 0.5}
    assert user.notify(url="http://h", tags=("a",)).arguments() == {"tags": ["a"],
                                                                    "url": "http://h"}
    assert user.notify(url="u").retries == 2 and not user.notify(url="u").cache
    # the function itself is still there, to test it as plain Python
    assert user.publish.python_func.__name__ == "publish"


def test_a_step_round_trips_through_the_spec(taxi):
    pipeline = _with(taxi, user.business_check(floor=0.6), user.publish,
                     user.notify(url="http://hook", tags=["x", 1]))
    again = ef.Pipeline.from_json(pipeline.to_json())
    assert again == pipeline
    assert again.steps[2].arguments() == {"tags": ["x", 1], "url": "http://hook"}


@pytest.mark.parametrize("arguments, path, expected", [
    ({"url": "u", "tagz": []}, "steps['notify'].tagz", "did you mean 'tags'?"),
    ({"url": object()}, "steps['notify'].url", "a JSON value"),
    ({"url": "u", "tags": [1, {2: 3}]}, "steps['notify'].tags[1].2", "a JSON object key"),
    ({"url": float("nan")}, "steps['notify'].url", "a finite number"),
    ({}, "steps['notify'].url", "a value (the parameter has no default)"),
    ({"url": "u", "pushed": "x"}, "steps['notify'].pushed", "an artifact is bound by its name"),
])
def test_bad_arguments_are_refused_when_the_step_is_declared(arguments, path, expected):
    with pytest.raises(ef.DslError) as caught:
        user.notify(**arguments)
    assert caught.value.path == path
    assert expected in str(caught.value)


def test_a_step_left_uncalled_with_a_required_parameter_is_refused(taxi):
    with pytest.raises(ef.DslError) as caught:
        _with(taxi, user.needs_value)
    assert caught.value.path == "steps[0]"
    assert "needs_value() called with its parameters" in str(caught.value)


def test_bad_signatures_are_refused_when_the_function_is_decorated():
    for fn, fragment in ((signatures.star, "a named parameter"),
                         (signatures.artifact_default, "no default"),
                         (signatures.not_json, "a JSON type"),
                         (signatures.camel, "lower-case identifier"),
                         (signatures.undefined_annotation, "annotations that evaluate")):
        with pytest.raises(ef.DslError) as caught:
            ef.step(fn)
        assert fragment in str(caught.value), (fn.__name__, str(caught.value))
        assert fn.__name__ in caught.value.path

    def nested():
        pass

    for fn in (nested, lambda: None):
        with pytest.raises(ef.DslError, match="module-level function"):
            ef.step(fn)


def test_every_bad_place_in_the_dag_is_reported_at_once(taxi):
    with pytest.raises(ef.DslErrors) as caught:
        _with(taxi, user.reads_typo, user.reads_model_as_data, user.loop_a, user.loop_b,
              user.business_check, user.gated, user.gated_on_nothing, user.writes_examples,
              user.business_check)
    errors = {e.path: e for e in caught.value.errors}
    assert sorted(errors) == sorted([
        "steps[0].inputs[0]", "steps[1].inputs[0]", "steps[5].when.key", "steps[5].after[0]",
        "steps[6].when.step", "steps[7].outputs[0]", "steps[8].name", "steps[2]"])
    assert errors["steps[0].inputs[0]"].note == "did you mean 'evaluation'?"
    assert errors["steps[1].inputs[0]"].expected.startswith("Input[TrainedModel]")
    assert errors["steps[1].inputs[0]"].received == "Input[Dataset]"
    assert errors["steps[5].when.key"].note == "did you mean 'auc'?"
    assert errors["steps[5].after[0]"].note == "did you mean 'train'?"
    assert errors["steps[6].when.step"].received == "nowhere"
    assert "step 'ingest' writes it" in str(errors["steps[7].outputs[0]"])
    assert "used once" in errors["steps[8].name"].expected
    assert errors["steps[2]"].received in ("loop_a -> loop_b -> loop_a",
                                           "loop_b -> loop_a -> loop_b")


def test_an_artifact_written_only_with_a_declared_step_says_so(taxi):
    no_push = dataclasses.replace(taxi, push=None)
    with pytest.raises(ef.DslErrors) as caught:
        _with(no_push, user.notify(url="u"))
    assert _paths(caught.value) == ["steps[0].inputs[0]", "steps[0].after[0]"]
    assert "only when the pipeline declares the step" in str(caught.value)


def test_when_on_a_step_without_a_declared_result_names_the_way(taxi):
    with pytest.raises(ef.DslErrors) as caught:
        _with(taxi, user.counts, user.after_counts)
    (error,) = caught.value.errors
    assert error.path == "steps[1].when.key"
    assert "NamedTuple return annotation" in error.note


def test_importing_the_dsl_and_declaring_steps_imports_no_tensorflow():
    code = ("import sys; import estflow.dsl as ef; "
            "from tests.dsl.user_steps_pkg import steps; steps.business_check(floor=1.0); "
            "print(sorted(m for m in ('tensorflow', 'apache_beam', 'kfp') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def _step(name: str, reads: list[str]) -> UserStep:
    return UserStep(name=name, fn=ef.CallableRef("m", name),
                    inputs=tuple(Port(f"out_{r}", "Dataset") for r in reads),
                    outputs=(Port(f"out_{name}", "Dataset"),))


def _has_cycle(edges: dict[str, set[str]]) -> bool:
    """Reference: a node reaches itself in the transitive closure (Warshall)."""
    names = sorted(edges)
    reach = {a: set(edges[a]) for a in names}
    for k, i in itertools.product(names, names):
        if k in reach[i]:
            reach[i] |= reach[k]
    return any(n in reach[n] for n in names)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 7).flatmap(lambda n: st.lists(
    st.lists(st.integers(0, n - 1), max_size=3, unique=True), min_size=n, max_size=n)))
def test_the_cycle_check_agrees_with_reachability(reads):
    names = [f"s{i}" for i in range(len(reads))]
    steps = [_step(n, [names[j] for j in r if j != i]) for i, (n, r) in
             enumerate(zip(names, reads, strict=False))]
    edges = {n: {names[j] for j in r if j != i} for i, (n, r) in enumerate(zip(names, reads, strict=False))}
    errors = graph_errors(steps, [], {}, {})
    cycles = [e for e in errors if "no cycle" in e.expected]
    assert bool(cycles) == _has_cycle(edges)
    assert len(errors) == len(cycles)  # nothing else is wrong with these graphs
    if cycles:  # the cycle named is one: each step reads the previous one's output
        ring = cycles[0].received.split(" -> ")
        assert ring[0] == ring[-1]
        for before, after in zip(ring, ring[1:], strict=False):
            assert before in edges[after]


def test_the_spec_of_a_step_is_json_with_its_parameters_as_given(taxi):
    pipeline = _with(taxi, user.notify(url="http://h", tags=[1.5, None, True]))
    data = json.loads(pipeline.to_json())
    (step,) = data["steps"]
    assert json.loads(step["parameters"]) == {"tags": [1.5, None, True], "url": "http://h"}

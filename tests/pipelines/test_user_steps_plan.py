"""User steps in the plan: placed by what they read, keyed by what they read.

The plan puts each user step as soon as the steps it waits for (its inputs' writers, its
``after``, its ``when``'s step) are planned; the fingerprint keys (estflow.dsl.fingerprints)
cover a user step's function (by its code digest), its parameters and its inputs, so editing
one step's function changes its key and its dependents' keys only, and an unrelated step
added to the pipeline changes no existing key."""

from __future__ import annotations

import dataclasses
import json

import pytest

import estflow.dsl as ef
from estflow.dsl import fingerprints as fp
from estflow.pipelines import loader
from estflow.pipelines.plan import build_plan
from tests.dsl.user_steps_pkg import steps as user


@ef.step
def sample_rows(examples: ef.Input[ef.Examples], sample: ef.Output[ef.Dataset],
                rows: int = 10) -> None:
    pass


@ef.step
def profile(sample: ef.Input[ef.Dataset]) -> None:
    pass


@pytest.fixture(scope="module")
def taxi() -> ef.Pipeline:
    return loader.load("estflow.pipelines.examples.taxi").pipeline


def _pipeline(taxi, *steps):
    return dataclasses.replace(taxi, steps=steps)


def _keys(pipeline: ef.Pipeline, code: dict[str, str] | None = None) -> dict[str, str]:
    plan = build_plan(pipeline, source_root="ROOT")
    paths = fp.callable_paths(pipeline)
    facts = fp.Facts(estflow={"version": "1"}, source={"digest": "data-1"},
                     code={p: (code or {}).get(p, f"digest of {r}") for p, r in paths.items()})
    keys = fp.step_keys(pipeline, [s.plan_step() for s in plan.steps], facts)
    return {name: k.key for name, k in keys.items()}


def test_user_steps_are_placed_by_what_they_wait_for(taxi):
    pipeline = _pipeline(taxi, user.notify(url="u"), user.publish, user.business_check,
                         profile, sample_rows)
    plan = build_plan(pipeline, source_root="ROOT")
    assert [s.name for s in plan.steps] == [
        "ingest", "sample_rows", "profile", "transform", "train", "evaluate",
        "business_check", "publish", "push", "notify"]
    publish = plan.step("publish")
    assert publish.inputs == (("report", "business_check"),)
    assert publish.outputs == ("publish_result", "table")
    assert publish.when == ef.When("business_check", "ok", "==", True)
    assert publish.module == "estflow.components.user_step"
    assert dict(publish.options) == {"step": "publish"}
    notify = plan.step("notify")
    assert (notify.after, notify.retries, notify.caching, notify.side_effects) == (
        ("push",), 2, False, True)
    assert notify.argv("SPEC", {"pushed": "/p", "notify_result": "/r"}) == [
        "--spec", "SPEC", "--pushed", "/p", "--notify_result", "/r", "--step", "notify"]


def test_each_user_step_gets_a_valid_spec_with_its_upstream_steps_only(taxi):
    pipeline = _pipeline(taxi, user.business_check, user.publish, user.notify(url="u"),
                         sample_rows)
    plan = build_plan(pipeline, source_root="ROOT")
    specs = {s.name: fp.project(pipeline, fp.step_reads(pipeline, s.reads))
             for s in plan.steps}
    assert [s.name for s in specs["publish"].steps] == ["business_check", "publish"]
    assert [s.name for s in specs["business_check"].steps] == ["business_check"]
    assert [s.name for s in specs["notify"].steps] == ["notify"]
    assert specs["notify"].push == pipeline.push  # it reads `pushed`: push must exist
    assert specs["business_check"].push is None
    for name in ("ingest", "transform", "train", "evaluate"):
        assert specs[name].steps == ()  # no built-in step reads the user steps
    for spec in specs.values():  # each one a pipeline the step's process can read back
        assert ef.Pipeline.from_json(spec.to_json()) == spec


def test_editing_one_function_changes_its_key_and_its_dependents_keys_only(taxi):
    pipeline = _pipeline(taxi, user.business_check, user.publish, sample_rows, profile)
    before = _keys(pipeline)
    edited = _keys(pipeline, {"steps[business_check].fn": "an edited digest"})
    changed = sorted(n for n in before if before[n] != edited[n])
    assert changed == ["business_check", "publish"]
    edited = _keys(pipeline, {"steps[sample_rows].fn": "an edited digest"})
    assert sorted(n for n in before if before[n] != edited[n]) == ["profile", "sample_rows"]


def test_a_parameter_changes_its_step_and_dependents_and_a_new_step_changes_nothing(taxi):
    before = _keys(_pipeline(taxi, user.business_check, user.publish, sample_rows))
    after = _keys(_pipeline(taxi, user.business_check(floor=0.9), user.publish, sample_rows))
    assert sorted(n for n in before if before[n] != after[n]) == ["business_check", "publish"]
    grown = _keys(_pipeline(taxi, user.business_check, user.publish, sample_rows, profile))
    assert {n: grown[n] for n in before} == before


def test_the_fingerprint_step_is_given_every_user_step(taxi):
    pipeline = _pipeline(taxi, user.business_check, user.publish)
    plan = build_plan(pipeline, source_root="ROOT")
    keyed = json.loads(dict(plan.fingerprint.options)["plan"])
    assert [s["name"] for s in keyed][-3:] == ["business_check", "publish", "push"]
    assert fp.callable_paths(pipeline) == {
        "derive.fn": pipeline.derive.fn, "steps[business_check].fn": pipeline.steps[0].fn,
        "steps[publish].fn": pipeline.steps[1].fn}

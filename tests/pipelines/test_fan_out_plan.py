"""A mapped step in the plan: one planned step per item (``score_0``, ``score_1``, ...: the one
entry point with ``--step score --item i``, writing ``scores_i`` and ``score_i_result``), then
the step ``score`` collecting them (what the steps after it read and wait for). Each item is
keyed by its own parameters and place only: adding an item or editing another leaves its key;
the collecting step and its readers are rekeyed. The items wait for nothing of each other, so
the scheduler runs them at once, and a failing item leaves its readers unstarted."""

from __future__ import annotations

import dataclasses
import threading

import pytest

import estflow.dsl as ef
from estflow.dsl import fingerprints as fp
from estflow.pipelines import loader
from estflow.pipelines.local.schedule import Budget
from estflow.pipelines.local.schedule import run_at_once
from estflow.pipelines.local.schedule import waits_for
from estflow.pipelines.plan import build_plan


@ef.step
def score(evaluation: ef.Input[ef.Evaluation], scores: ef.Output[ef.Dataset],
          threshold: float = 0.5, table: str = "t") -> dict:
    return {}


@ef.step
def read(scores: ef.Input[ef.Dataset]) -> None:
    pass


@pytest.fixture(scope="module")
def taxi() -> ef.Pipeline:
    return loader.load("estflow.pipelines.examples.taxi").pipeline


def _pipeline(taxi, *steps):
    return dataclasses.replace(taxi, steps=steps)


def _keys(pipeline: ef.Pipeline) -> dict[str, str]:
    plan = build_plan(pipeline, source_root="ROOT")
    paths = fp.callable_paths(pipeline)
    facts = fp.Facts(estflow={"version": "1"}, source={"digest": "data-1"},
                     code={p: f"digest of {r}" for p, r in paths.items()})
    keys = fp.step_keys(pipeline, [s.plan_step() for s in plan.steps], facts)
    return {name: k.key for name, k in keys.items()}


def test_a_mapped_step_is_planned_as_its_items_and_their_collection(taxi):
    plan = build_plan(_pipeline(taxi, score.map(threshold=[0.3, 0.5, 0.7], table="d"), read),
                      source_root="ROOT")
    names = [s.name for s in plan.steps]
    assert names[names.index("evaluate") + 1:] == [
        "score_0", "score_1", "score_2", "score", "read", "push"]
    item = plan.step("score_1")
    assert item.inputs == (("evaluation", "evaluate"),)
    assert item.outputs == ("score_1_result", "scores_1")
    assert item.options == (("step", "score"), ("item", "1"))
    argv = item.argv("spec.json", {"evaluation": "E", "score_1_result": "R1", "scores_1": "S1"})
    assert argv == ["--spec", "spec.json", "--evaluation", "E", "--score_1_result", "R1",
                    "--scores_1", "S1", "--step", "score", "--item", "1"]
    assert "steps.score[1]" in item.reads and item.summary == "result.json"
    collect = plan.step("score")
    assert collect.inputs == tuple((a, f"score_{i}") for i in range(3)
                                   for a in (f"score_{i}_result", f"scores_{i}"))
    assert collect.outputs == ("score_result", "scores")
    assert collect.options == (("step", "score"),)
    assert plan.step("read").inputs == (("scores", "score"),)
    deps = waits_for(plan)
    assert deps["score_0"] == deps["score_2"] == {"evaluate"}
    assert deps["score"] == {"score_0", "score_1", "score_2"}


def test_each_item_is_keyed_by_its_own_parameters(taxi):
    three = _keys(_pipeline(taxi, score.map(threshold=[0.3, 0.5, 0.7]), read))
    four = _keys(_pipeline(taxi, score.map(threshold=[0.3, 0.5, 0.7, 0.9]), read))
    edited = _keys(_pipeline(taxi, score.map(threshold=[0.3, 0.6, 0.7]), read))
    common = _keys(_pipeline(taxi, score.map(threshold=[0.3, 0.5, 0.7], table="x"), read))
    changed = {n for n in four if three.get(n) != four[n]}
    assert changed == {"score_3", "score", "read"}
    assert {n for n in three if three[n] != edited[n]} == {"score_1", "score", "read"}
    assert {n for n in three if three[n] != common[n]} == {
        "score_0", "score_1", "score_2", "score", "read"}
    assert len({three[f"score_{i}"] for i in range(3)}) == 3


def test_the_projected_spec_of_an_item_holds_that_item_only(taxi):
    pipeline = _pipeline(taxi, score.map(threshold=[0.3, 0.5, 0.7]), read)
    plan = build_plan(pipeline, source_root="ROOT")
    spec = fp.project(pipeline, plan.step("score_2").reads)
    (step,) = spec.steps
    assert step.items == [{}, {}, {"threshold": 0.7}]
    assert step.item_arguments(2) == {"table": "t", "threshold": 0.7}
    assert fp.project(pipeline, plan.step("read").reads).steps == pipeline.steps


def test_items_run_at_once_and_a_failing_item_leaves_its_readers_unstarted(taxi):
    plan = build_plan(_pipeline(taxi, score.map(threshold=[0.3, 0.5, 0.7]), read),
                      source_root="ROOT")
    items = [f"score_{i}" for i in range(3)]
    together = threading.Barrier(3, timeout=10)  # each item waits until all three run
    ran, blocked = [], {}

    def run_step(step):
        if step.name in items:
            together.wait()
            if step.name == "score_1":
                raise RuntimeError("item 1 failed")
        ran.append(step.name)

    with pytest.raises(RuntimeError, match="item 1 failed"):
        run_at_once(plan, run_step, budget=Budget(jobs=8, memory=2**40), echo=lambda _: None,
                    install_echo=lambda _: None,
                    block=lambda step, why: blocked.setdefault(step.name, why),
                    stop_all=lambda: None)
    assert "score_0" in ran and "score_2" in ran
    assert "score" not in ran and "read" not in ran
    assert blocked["score"] == "it waits for step 'score_1', which failed"
    assert "read" in blocked

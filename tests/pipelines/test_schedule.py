"""The local runner's scheduler (estflow.pipelines.local.schedule): which steps wait for which, and
running a plan's steps at once within a budget.

Plans are generated (hypothesis): random DAGs of fake steps, some failing. Checked against a
reference computed from the graph alone: every step that does not (transitively) wait for a
failed step runs, after all it waits for; every step that does is not started and is named with
a step it waits for; the first failure in plan order is raised; at no moment do the running
steps' requests exceed the budget (one step always runs)."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

import estflow.dsl as ef
from estflow.pipelines import loader
from estflow.pipelines.local.schedule import Budget
from estflow.pipelines.local.schedule import core_shares
from estflow.pipelines.local.schedule import parse_memory
from estflow.pipelines.local.schedule import run_at_once
from estflow.pipelines.local.schedule import runs_one_at_a_time
from estflow.pipelines.local.schedule import waits_for
from estflow.pipelines.plan import Plan
from estflow.pipelines.plan import PlannedStep
from estflow.pipelines.plan import build_plan
from tests.dsl.user_steps_pkg import steps as user


class Boom(RuntimeError):
    pass


def _step(name: str, deps: list[str], cpu: str, memory: str = "1Gi") -> PlannedStep:
    return PlannedStep(name=name, module="m", inputs=(), outputs=(), options=(),
                       description="", requests=(cpu, memory), after=tuple(deps))


def _run(plan: Plan, failing: set[str], budget: Budget):
    lock = threading.Lock()
    running: list[PlannedStep] = []
    finished: list[str] = []
    started: dict[str, set[str]] = {}
    peaks: list[tuple[int, int]] = []
    blocked: dict[str, str] = {}

    def run_step(step: PlannedStep) -> None:
        with lock:
            started[step.name] = set(finished)
            running.append(step)
            peaks.append((sum(int(s.requests[0].rstrip("m")) for s in running), len(running)))
        time.sleep(0.001)
        with lock:
            running.remove(step)
            finished.append(step.name)
        if step.name in failing:
            raise Boom(step.name)

    lines: list[str] = []
    error = None
    try:
        run_at_once(plan, run_step, budget=budget, echo=lines.append,
                    install_echo=lambda echo: None,
                    block=lambda step, why: blocked.__setitem__(step.name, why),
                    stop_all=lambda: None)
    except Boom as err:
        error = err
    return started, blocked, error, peaks


@settings(max_examples=120, deadline=None)
@given(st.integers(1, 8).flatmap(lambda n: st.tuples(
    st.lists(st.lists(st.integers(0, n - 1), max_size=3, unique=True), min_size=n, max_size=n),
    st.sets(st.integers(0, n - 1)),
    st.lists(st.sampled_from(["250m", "500m", "1000m", "1500m"]), min_size=n, max_size=n),
    st.integers(1, 3))))
def test_generated_plans_run_as_their_graph_says(case):
    deps_idx, failing_idx, cpus, cores = case
    names = [f"s{i}" for i in range(len(deps_idx))]
    # deps only on earlier steps: a plan is in order
    deps = {names[i]: sorted({names[j] for j in d if j < i}) for i, d in enumerate(deps_idx)}
    plan = Plan(pipeline=None, steps=tuple(_step(n, deps[n], cpus[i])
                                           for i, n in enumerate(names)))
    failing = {names[i] for i in failing_idx}
    started, blocked, error, peaks = _run(plan, failing, Budget(jobs=cores, memory=2**40))
    # reference: a step runs unless it waits (transitively) for a failed step
    doomed: set[str] = set()
    for n in names:
        if any(d in failing and d in started or d in doomed for d in deps[n]):
            doomed.add(n)
    assert set(blocked) == doomed
    assert set(started) == set(names) - doomed
    for n, before in started.items():
        assert set(deps[n]) <= before, (n, deps[n], before)
    for n, why in blocked.items():
        assert any(f"step {d!r}" in why for d in deps[n])
    ran_and_failed = [n for n in names if n in failing and n in started]
    if ran_and_failed:
        assert error is not None and str(error) == ran_and_failed[0]
    else:
        assert error is None
    for cpu, count in peaks:
        assert count == 1 or (cpu <= 1000 * cores and count <= cores)


def test_a_training_plan_runs_one_step_at_a_time_and_user_steps_beside_it():
    taxi = loader.load("estflow.pipelines.examples.taxi").pipeline
    plan = build_plan(taxi, source_root="ROOT")
    assert runs_one_at_a_time(plan)
    with_checks = dataclasses.replace(taxi, checks=ef.DataChecks())
    plan = build_plan(with_checks, source_root="ROOT")
    assert waits_for(plan)["transform"] == {"ingest", "validate"}  # validate gates it
    assert runs_one_at_a_time(plan)
    steps = dataclasses.replace(taxi, steps=(user.business_check, user.publish))
    plan = build_plan(steps, source_root="ROOT")
    assert not runs_one_at_a_time(plan)  # business_check may run beside push
    assert waits_for(plan)["publish"] == {"business_check"}


@pytest.mark.parametrize("text, expected", [("512Mi", 512 * 2**20), ("8Gi", 8 * 2**30),
                                            ("2G", 2 * 10**9), ("1000", 1000)])
def test_memory_quantities(text, expected):
    assert parse_memory(text) == expected


def test_a_bad_memory_quantity_is_named():
    with pytest.raises(ValueError, match="Received memory '8 GB', expected a quantity"):
        parse_memory("8 GB")


def test_memory_bounds_what_runs_at_once():
    plan = Plan(pipeline=None, steps=tuple(_step(f"s{i}", [], "100m", "3Gi") for i in range(4)))
    started, _, _, peaks = _run(plan, set(), Budget(jobs=8, memory=7 * 2**30))
    assert len(started) == 4
    assert max(count for _, count in peaks) <= 2


def _antichains(names: list[str], before: dict[str, set[str]]):
    """Every set of at least two steps none of which waits for another (small plans only)."""
    for mask in range(1, 1 << len(names)):
        chosen = [n for i, n in enumerate(names) if mask >> i & 1]
        if len(chosen) > 1 and all(a not in before[b] for a in chosen for b in chosen):
            yield chosen


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 7).flatmap(lambda n: st.tuples(
    st.lists(st.lists(st.integers(0, n - 1), max_size=3, unique=True), min_size=n, max_size=n),
    st.lists(st.sampled_from(["100m", "500m", "1", "2"]), min_size=n, max_size=n),
    st.integers(1, 16), st.one_of(st.none(), st.integers(1, 4)))))
def test_steps_that_can_run_together_share_the_cores(case):
    """Whatever set of steps runs at once, the TensorFlow threads of those asking a core or
    more add up to at most the cores (one each at least); a step that can only run alone, or
    asks less than a core, keeps TensorFlow's default; --jobs 1 shares nothing."""
    deps_idx, cpus, cores, jobs = case
    names = [f"s{i}" for i in range(len(deps_idx))]
    deps = {names[i]: sorted({names[j] for j in d if j < i}) for i, d in enumerate(deps_idx)}
    plan = Plan(pipeline=None, steps=tuple(_step(n, deps[n], cpus[i])
                                           for i, n in enumerate(names)))
    budget = Budget(jobs=jobs, memory=2**40) if jobs else _cores(cores)
    shares = core_shares(plan, budget)
    before: dict[str, set[str]] = {}
    for n in names:
        before[n] = set(deps[n]).union(*(before[d] for d in deps[n]))
    heavy = {n for i, n in enumerate(names) if cpus[i] in ("1", "2")}
    together = [set(c) & heavy for c in _antichains(names, before)]
    if jobs == 1:
        assert shares == {}
    else:
        assert set(shares) == set().union(*(c for c in together if len(c) > 1))
    for chain in together:
        if len(chain) > 1 and jobs != 1:
            assert sum(shares[n] for n in chain) <= max(budget.cpu // 1000, len(chain))
    assert all(n >= 1 for n in shares.values())


def _cores(n: int) -> Budget:
    budget = Budget(memory=2**40)
    budget.cpu = 1000 * n
    return budget


def test_two_candidates_train_on_a_core_each_on_two_cores():
    taxi = loader.load("estflow.pipelines.examples.taxi").pipeline
    assert core_shares(build_plan(taxi, source_root="ROOT"), _cores(2)) == {}
    candidates = dataclasses.replace(taxi, model=ef.Candidates({
        "wide_deep": taxi.model,
        "linear": ef.LinearClassifier(feature_columns=taxi.model.linear_feature_columns)}))
    shares = core_shares(build_plan(candidates, source_root="ROOT"), _cores(2))
    assert shares["train_wide_deep"] == shares["train_linear"] == 1
    assert "transform" not in shares and "push" not in shares
    assert core_shares(build_plan(candidates, source_root="ROOT"), Budget(jobs=1)) == {}

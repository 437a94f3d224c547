"""The user steps of ``test_kfp_semantics_spec.py``: KFP's local-runner test pipelines
(``sdk/python/kfp/local/*_test.py``, ``sdk/python/test/local_execution/``) declared as estflow
steps. The test copies this file, as module ``kfp_semantics_steps``, next to the pipeline file
that ``estflow run`` runs, and onto the path of the ``kfp.local`` run of the same declarations
compiled by estflow; :func:`declared` is the pipeline's ``steps``.

A KFP pipeline argument that a ``dsl.If`` compares becomes a result of the step
:func:`pipeline_args` (an estflow ``when`` compares a step's result); a KFP test's counter file
(one ``x`` appended per execution) is kept: a relative path, in the directory the steps run in.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import estflow.dsl as ef


def _count(counter_path: str) -> int:
    """Append one execution to ``counter_path`` (as KFP's tests' components do); the count."""
    with open(counter_path, "a") as f:
        f.write("x")
    return len(Path(counter_path).read_text())


# --- conditions: test_condition_supported, TestOneOf, flip_coin ---------------------------------

class Args(NamedTuple):
    x: str
    flag_yes: str
    flag_no: str


@ef.step
def pipeline_args(x: str = "bar", flag_yes: str = "yes", flag_no: str = "no") -> Args:
    """The KFP tests' pipeline arguments: ``my_pipeline(x='bar')``, ``oneof_pipeline(flag=...)``
    called with 'yes' and with 'no'."""
    return Args(x=x, flag_yes=flag_yes, flag_no=flag_no)


@ef.step(when=ef.result("pipeline_args")["x"] == "foo")
def pass_op(passed: ef.Output[ef.Dataset]) -> dict:
    """``with dsl.Condition(x == 'foo'): pass_op()``."""
    (passed / "ran.txt").write_text("ran")
    return {"ran": True}


@ef.step
def after_pass_op(passed: ef.Input[ef.Dataset]) -> dict:
    """Reads pass_op's output: in KFP it could only sit inside pass_op's condition."""
    return {"read": (passed / "ran.txt").read_text()}


class Value(NamedTuple):
    output: str


def return_value(val: str = "") -> Value:
    """TestOneOf's ``return_value(val)``, declared four times below: each branch of
    ``dsl.If(flag == 'yes')`` / ``dsl.Else()``, for flag 'yes' and flag 'no'."""
    return Value(output=val)


# dsl.Else() is the complementary condition (estflow declares no else)
yes_true_task = ef.step(return_value, name="yes_true_task",
                        when=ef.result("pipeline_args")["flag_yes"] == "yes")
yes_false_task = ef.step(return_value, name="yes_false_task",
                         when=ef.result("pipeline_args")["flag_yes"] != "yes")
no_true_task = ef.step(return_value, name="no_true_task",
                       when=ef.result("pipeline_args")["flag_no"] == "yes")
no_false_task = ef.step(return_value, name="no_false_task",
                        when=ef.result("pipeline_args")["flag_no"] != "yes")


class Coin(NamedTuple):
    side: str


@ef.step
def flip_coin(side: str = "heads") -> Coin:
    """flip_coin.py's ``flip_coin()``: heads, not at random (KFP's test accepts either side)."""
    return Coin(side=side)


class Number(NamedTuple):
    n: int


@ef.step(when=ef.result("flip_coin")["side"] == "heads")
def random_num_head(n: int = 7) -> Number:
    """``random_num(low=0, high=9)`` under ``dsl.If(flip.output == 'heads')``: 7, fixed."""
    return Number(n=n)


@ef.step(when=ef.result("flip_coin")["side"] == "tails")
def random_num_tail(n: int = 17) -> Number:
    """``random_num(low=10, high=19)`` under ``dsl.If(flip.output == 'tails')``."""
    return Number(n=n)


def _message(result: Path, side: str, op: str, bound: int) -> dict:
    n = json.loads((result / "result.json").read_text())["n"]
    return {"msg": f"{side} and {n} {op} {bound}!"}


def print_msg_heads(random_num_head_result: ef.Input[ef.Metrics], op: str = ">",
                    bound: int = 5) -> dict:
    """``print_msg(msg="heads and %s > 5!" % random_num_head.output)``."""
    return _message(random_num_head_result, "heads", op, bound)


def print_msg_tails(random_num_tail_result: ef.Input[ef.Metrics], op: str = ">",
                    bound: int = 15) -> dict:
    """``print_msg(msg="tails and %s > 15!" % random_num_tail.output)``."""
    return _message(random_num_tail_result, "tails", op, bound)


# the nested dsl.If(random_num_*.output > / <= bound) of each branch
heads_big = ef.step(print_msg_heads, name="heads_big",
                    when=ef.result("random_num_head")["n"] > 5)
heads_small = ef.step(print_msg_heads, name="heads_small",
                      when=ef.result("random_num_head")["n"] <= 5)
tails_big = ef.step(print_msg_tails, name="tails_big",
                    when=ef.result("random_num_tail")["n"] > 15)
tails_small = ef.step(print_msg_tails, name="tails_small",
                      when=ef.result("random_num_tail")["n"] <= 15)


# --- ParallelFor and dsl.Collected: pipeline_with_collected_artifacts, collected_parameters ------

@ef.step
def write_artifact(out: ef.Output[ef.Artifact], index: int = 0) -> dict:
    """pipeline_with_collected_artifacts.py's ``write_artifact(index, out)``."""
    (out / "value.txt").write_text(str(index))
    return {"index": index}


@ef.step
def read_and_join(out: ef.Input[ef.Artifact]) -> dict:
    """``read_and_join(artifacts=dsl.Collected(producer.outputs['out']))``: KFP's joins the
    parts sorted; ``in_order`` is the collected order, item by item."""
    count = len(json.loads((out / "items.json").read_text()))
    parts = [(out / str(i) / "value.txt").read_text().strip() for i in range(count)]
    return {"output": ",".join(sorted(parts)), "in_order": ",".join(parts)}


@ef.step
def prepend_id(content: str = "") -> dict:
    """collected_parameters.py's ``prepend_id(content)``."""
    return {"output": f"model_id_{content}"}


@ef.step
def consume_ids(prepend_id_result: ef.Input[ef.Metrics]) -> dict:
    """``consume_ids(ids=dsl.Collected(prepend_id_op.output))``: the collected results."""
    items = json.loads((prepend_id_result / "result.json").read_text())["items"]
    return {"ids": ",".join(item["output"] for item in items), "output": "completed"}


# --- retries: TestRetryLogic -------------------------------------------------------------------

class Attempt(NamedTuple):
    output: str


@ef.step(resources=ef.Resources(retries=3, retry_backoff="0s"))
def flaky_component(counter_path: str = "flaky.count") -> Attempt:
    """``flaky_component(counter_path)`` with ``set_retry(num_retries=3,
    backoff_duration='0s')``: fails on its first two attempts."""
    count = _count(counter_path)
    if count < 3:
        raise RuntimeError(f"Attempt {count}: not yet!")
    return Attempt(output=f"succeeded on attempt {count}")


@ef.step(resources=ef.Resources(retries=1, retry_backoff="0s"))
def always_fail(counter_path: str = "always_fail.count") -> Attempt:
    """``always_fail()`` with ``set_retry(num_retries=1, backoff_duration='0s')``."""
    _count(counter_path)
    raise RuntimeError("always fails")


# --- caching: TestLocalCaching, cache_test.py --------------------------------------------------

class Hello(NamedTuple):
    output: str


@ef.step
def counting_component(counter_path: str = "counting.count") -> Hello:
    """``counting_component(counter_path)``: one ``x`` per execution, returns 'hello'."""
    _count(counter_path)
    return Hello(output="hello")


# ``t.set_caching_options(False)``
counting_no_cache = ef.step(counting_component.python_func, name="counting_no_cache",
                            cache=False)


@ef.step
def echo(echoed: ef.Output[ef.Dataset], counter_path: str = "echo.count",
         val: str = "a") -> Hello:
    """``echo(counter_path, val)``; it also writes ``val`` as an artifact, which
    :func:`read_echo` reads (cache_test.py's ``test_artifact_argument_in_key``)."""
    _count(counter_path)
    (echoed / "val.txt").write_text(val)
    return Hello(output=val)


@ef.step
def read_echo(echoed: ef.Input[ef.Dataset], counter_path: str = "read_echo.count") -> Hello:
    """A step whose only argument that changes is an input artifact."""
    _count(counter_path)
    return Hello(output=(echoed / "val.txt").read_text())


# --- failure: test_fails_with_raise_on_error_false ---------------------------------------------

@ef.step
def raise_component(raised: ef.Output[ef.Dataset]) -> dict:
    """``raise_component()``."""
    raise Exception('Error from raise_component.')


@ef.step
def after_raise(raised: ef.Input[ef.Dataset], counter_path: str = "after_raise.count") -> dict:
    """A step reading the failing step's output (KFP: a task depending on it)."""
    _count(counter_path)
    return {"ran": True}


GROUPS = ("conditions", "fan_out", "retries_and_caching")


def declared(val: str = "a", failing: bool = False, groups: tuple[str, ...] = GROUPS) -> tuple:
    """The pipeline's steps: the cases of ``groups``, all at once (they do not wait for each
    other). ``val``: echo's argument; ``failing``: with the failing steps."""
    cases = {
        "conditions": (
            pipeline_args(), pass_op(), after_pass_op(),
            yes_true_task(val="from_true_branch"), yes_false_task(val="from_false_branch"),
            no_true_task(val="from_true_branch"), no_false_task(val="from_false_branch"),
            flip_coin(), random_num_head(), random_num_tail(),
            heads_big(op=">", bound=5), heads_small(op="<=", bound=5),
            tails_big(op=">", bound=15), tails_small(op="<=", bound=15)),
        "fan_out": (
            write_artifact.map(index=[2, 0, 1]), read_and_join(),
            prepend_id.map(content=["s1", "s2", "s3"]), consume_ids()),
        "retries_and_caching": (
            flaky_component(), counting_component(),
            counting_no_cache(counter_path="no_cache.count"), echo(val=val), read_echo()),
    }
    steps = tuple(s for group in groups for s in cases[group])
    if failing:
        steps += (raise_component(), after_raise(), always_fail())
    return steps

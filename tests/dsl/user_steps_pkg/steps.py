"""Steps as a user writes them in a module of their own (tests of estflow.dsl.steps)."""

from __future__ import annotations

import json
from typing import NamedTuple

import estflow.dsl as ef


class Gate(NamedTuple):
    auc: float
    ok: bool


@ef.step
def business_check(evaluation: ef.Input[ef.Evaluation], report: ef.Output[ef.Markdown],
                   floor: float = 0.5) -> Gate:
    metrics = json.loads((evaluation / "metrics.json").read_text())["metrics"]
    (report / "report.md").write_text(f"auc {metrics['auc']}\n")
    return Gate(metrics["auc"], metrics["auc"] > floor)


@ef.step(when=ef.result("business_check")["ok"] == True)  # noqa: E712 (a condition)
def publish(report: ef.Input[ef.Markdown], table: ef.Output[ef.Dataset],
            db: str = "scores.db") -> dict:
    (table / db).write_text((report / "report.md").read_text())
    return {"rows": 1}


@ef.step(cache=False, retries=2, after=("push",))
def notify(pushed: ef.Input[ef.Pushed], url: str, tags: list | None = None) -> None:
    print(url, tags, (pushed / "push.json").read_text())


@ef.step
def needs_value(examples: ef.Input[ef.Examples], table: str) -> None:
    print(table, json.dumps(sorted(p.name for p in examples.iterdir())))


# Steps in wrong places of a DAG (test_user_steps.py declares them in one pipeline).
@ef.step
def reads_typo(evaluaton: ef.Input[ef.Evaluation]):
    pass


@ef.step
def reads_model_as_data(model: ef.Input[ef.Dataset]):
    pass


@ef.step
def loop_a(b_out: ef.Input[ef.Dataset], a_out: ef.Output[ef.Dataset]):
    pass


@ef.step
def loop_b(a_out: ef.Input[ef.Dataset], b_out: ef.Output[ef.Dataset]):
    pass


@ef.step(when=ef.result("business_check")["acu"] > 0.5, after=("trian",))
def gated():
    pass


@ef.step(when=ef.result("nowhere")["x"] == 1)
def gated_on_nothing():
    pass


@ef.step
def writes_examples(examples: ef.Output[ef.Dataset]):
    pass


@ef.step
def counts(evaluation: ef.Input[ef.Evaluation]) -> dict:
    return {}


@ef.step(when=ef.result("counts")["rows"] > 0)
def after_counts():
    pass

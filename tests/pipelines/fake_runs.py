"""Whole runs of fake steps: the five steps of a pipeline as :mod:`tests.pipelines.fake_step`
processes, writing the files the run summary reads (no TensorFlow or Beam).

In-process, :func:`use_fake_steps` makes ``estflow run`` (and ``estflow preprocess``: one
fake ``preprocess`` step) plan them; as a program,
``python -m tests.pipelines.fake_runs STEPS_JSON ESTFLOW_ARGS...`` is the ``estflow`` command
with fake steps (what a test sends Ctrl-C to). ``STEPS_JSON`` maps a step name to further
fake_step options (``{"train": {"sleep": "30"}}``; an ``emit`` value may be a dict).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Mapping

from estflow.dsl.contracts import PREPROCESS
from estflow.dsl.contracts import Files
from estflow.dsl.contracts import step_named
from estflow.dsl.pipeline import Pipeline
from estflow.pipelines import cli
from estflow.pipelines.cli import local_runs
from estflow.pipelines.local import runner as local_runner
from estflow.pipelines.local import stopping as _stopping
from estflow.pipelines.plan import LATE_INPUTS
from estflow.pipelines.plan import Plan
from estflow.pipelines.plan import PlannedStep
from estflow.pipelines.plan import fingerprint_step
from estflow.pipelines.plan import late_input

FAKE = "tests.pipelines.fake_step"

PUSHED = {"pushed": True, "model_name": "taxi", "version": 7, "path": "/models/taxi/7"}
NOT_PUSHED = {"pushed": False, "reasons": ["FAIL auc = 0.5 < lower_bound 0.85"]}
CHECKPOINT = {f"{Files.CHECKPOINTS}/checkpoint": 'model_checkpoint_path: "ckpt-200"\n',
              f"{Files.CHECKPOINTS}/ckpt-200.index": ""}

# name, inputs (artifact, producer), outputs, what it emits by default
_STEPS = (
    ("ingest", (), ("examples",), {}),
    ("transform", (("examples", "ingest"),), ("transformed",), {}),
    ("train", (("transformed", "transform"),), ("model",),
     {Files.TRAIN_RESULT: {"global_step": 200}}),
    ("evaluate", (("examples", "ingest"), ("model", "train")), ("evaluation",),
     {Files.METRICS: {"head": "binary", "metrics": {"auc": 0.9, "examples": 10}},
      Files.BLESSING: {"blessed": True, "reasons": ["PASS auc = 0.9 >= lower_bound 0.85"]}}),
    ("push", (("evaluation", "evaluate"), ("model", "train")), ("pushed",),
     {Files.PUSH_RESULT: PUSHED}),
)


_PREPROCESS = (("preprocess", (), ("examples", "transformed"), {}),)


def fake_plan(pipeline: Pipeline, steps: Mapping[str, Mapping], *,
              preprocess: bool = False, source_root: str | None = None) -> Plan:
    """The pipeline's steps (push only with a push target; or the one preprocess step) as fake
    steps, each with the options ``steps`` gives it (``emit`` entries replace the default
    files), reading the spec parts and having the side effects of the real ones; with a
    ``source_root``, the real fingerprint step first (as ``build_plan`` plans it)."""
    planned = []
    for name, inputs, outputs, emit in _PREPROCESS if preprocess else _STEPS:
        if name == "push" and pipeline.push is None:
            continue
        extra = dict(steps.get(name, {}))
        files = {**emit, **extra.pop("emit", {})}
        options = {"name": name, "reads": ",".join(a for a, _ in inputs),
                   "writes": ",".join(outputs), "emit": json.dumps(files),
                   **{k.replace("_", "-"): str(v) for k, v in extra.items()}}
        real = PREPROCESS if preprocess else step_named(name)
        # the run-time inputs the real step declares (the runner fills them in)
        options.update({o.flag: late_input(LATE_INPUTS[o.flag]) for o in real.options
                        if o.flag in LATE_INPUTS})
        planned.append(PlannedStep(name=name, module=FAKE, inputs=inputs, outputs=outputs,
                                   options=tuple(options.items()),
                                   description=f"fake {name}", reads=real.reads,
                                   side_effects=real.side_effects, summary=real.summary))
    plan = Plan(pipeline, tuple(planned))
    if source_root is None:
        return plan
    return dataclasses.replace(plan, fingerprint=fingerprint_step(plan, source_root))


def _planners(steps: Mapping[str, Mapping]) -> dict:
    return {(local_runner, "build_plan"):
                lambda pipeline, source_root, **_: fake_plan(pipeline, steps,
                                                             source_root=source_root),
            (local_runs, "build_preprocess_plan"):
                lambda pipeline, **_: fake_plan(pipeline, steps, preprocess=True)}


def use_fake_steps(monkeypatch, steps: Mapping[str, Mapping] | None = None) -> None:
    """Make ``estflow run`` and ``estflow preprocess`` (in this process) plan fake steps."""
    for (module, name), planner in _planners(steps or {}).items():
        monkeypatch.setattr(module, name, planner)


if __name__ == "__main__":
    _stopping.STOP_GRACE_S = (1.0, 1.0, 2.0)  # a step deaf to Ctrl-C is killed sooner
    for (_module, _name), _planner in _planners(json.loads(sys.argv[1])).items():
        setattr(_module, _name, _planner)
    sys.exit(cli.main(sys.argv[2:]))

"""The runner-neutral plan: the DAG of steps a Pipeline runs, with their artifacts and options.

Both the local runner and the KFP compiler consume a :class:`Plan`, so a local run and a
Kubeflow run execute the same steps, in the same order, through the same entry points
(``python -m estflow.components.<step>``). Every planned step comes from a
:class:`~estflow.dsl.contracts.Step` of the contract table: its module, artifacts and the
options it may take are read there, never written again here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from collections.abc import Sequence

from estflow.dsl.contracts import BATCH_PREDICT
from estflow.dsl.contracts import CANDIDATE_FINGERPRINTS
from estflow.dsl.contracts import CANDIDATE_STEPS
from estflow.dsl.contracts import FINGERPRINT
from estflow.dsl.contracts import MODEL_FINGERPRINT
from estflow.dsl.contracts import PREDICT_ONLY
from estflow.dsl.contracts import PREPROCESS
from estflow.dsl.contracts import RUN_REFERENCE
from estflow.dsl.contracts import SELECT
from estflow.dsl.contracts import SOURCE_DIGEST
from estflow.dsl.contracts import STEPS
from estflow.dsl.contracts import TRAIN
from estflow.dsl.contracts import USER_STEP_MODULE
from estflow.dsl.contracts import Result
from estflow.dsl.contracts import Step
from estflow.dsl.contracts import UiOutput
from estflow.dsl.contracts import for_candidate
from estflow.dsl.contracts import select_row
from estflow.dsl.contracts import tuned_train
from estflow.dsl.fingerprints import StepKeyInput
from estflow.dsl.models import Candidates
from estflow.dsl.pipeline import Pipeline
from estflow.dsl.steps import contract_row
from estflow.dsl.steps import item_row
from estflow.dsl.steps import upstream

__all__ = ["PlannedStep", "Plan", "build_plan", "build_preprocess_plan", "fingerprint_step",
           "late_input", "LATE_INPUTS", "TRAINING_STEPS", "with_user_steps"]

TRAINING_STEPS: tuple[Step, ...] = (*STEPS, BATCH_PREDICT)
"""The contract rows a training pipeline may run, in order (each one whose
:attr:`~estflow.dsl.contracts.Step.needs` the pipeline declares)."""

# Options known only when the run runs (the push step's model fingerprint and run reference,
# the ingest step's source digest):
# planned as placeholders, which the local runner fills in (PlannedStep.argv's ``late``) and the
# KFP compiler turns into task inputs. Option flag -> input name.
LATE_INPUTS = {MODEL_FINGERPRINT: "model_fingerprint", RUN_REFERENCE: "run",
               SOURCE_DIGEST: "source_digest",
               CANDIDATE_FINGERPRINTS: "candidate_fingerprints"}


def late_input(name: str) -> str:
    """The placeholder of run-time input ``name`` (one of :data:`LATE_INPUTS`' values)."""
    return "{{estflow-input:" + name + "}}"


@dataclasses.dataclass(frozen=True)
class PlannedStep:
    """One step: ``inputs`` maps an input artifact name to the step that produces it;
    ``options`` are its option values. The other fields are its contract row's
    (:class:`~estflow.dsl.contracts.Step`), copied by :meth:`from_step`: what its cache key
    covers, whether it may be reused, how its KFP task runs, its summary file."""

    name: str
    module: str
    inputs: tuple[tuple[str, str], ...]
    outputs: tuple[str, ...]
    options: tuple[tuple[str, str], ...]
    description: str
    reads: tuple[str, ...] | None = None
    side_effects: bool = False
    caching: bool = True
    requests: tuple[str, str] = ("1", "2Gi")
    runs_if: str | None = None
    result: Result | None = None
    ui_outputs: tuple[UiOutput, ...] = ()
    summary: str | None = None
    outside_storage: bool = False
    after: tuple[str, ...] = ()
    when: object | None = None
    retries: int = 0
    roles: tuple[tuple[str, str], ...] = ()
    of: str | None = None
    waits_for: tuple[str, ...] = ()
    warm: bool = True
    skip_note: str = ""

    def flag(self, artifact: str) -> str:
        """The entry point's flag (without ``--``) for ``artifact`` (its contract row's)."""
        return dict(self.roles).get(artifact, artifact)

    @classmethod
    def from_step(cls, step: Step, producers: Mapping[str, str],
                  options: Mapping[str, str]) -> PlannedStep:
        """Plan the contract ``step``.

        Args:
            step: the step as the contract table declares it.
            producers: artifact name -> the name of the earlier step that writes it; must hold
                every one of ``step.inputs``.
            options: option flag (without ``--``) -> value; every flag must be one of
                ``step.options``. They are passed in the order the contract declares them.

        Raises:
            ValueError: an input no earlier step writes, or an option the step does not take.
        """
        missing = [a for a in step.inputs if a not in producers]
        if missing:
            raise ValueError(f"Received producers for {sorted(producers)}, expected the "
                             f"inputs of step {step.name!r} too: {missing} (no earlier step "
                             "writes them)")
        declared = [o.flag for o in step.options]
        unknown = sorted(set(options) - set(declared))
        if unknown:
            raise ValueError(f"Received options {unknown} for step {step.name!r}, expected "
                             f"some of the options it declares: {declared}")
        copied = {f.name: getattr(step, f.name) for f in dataclasses.fields(cls)
                  if f.name not in ("inputs", "options")}
        return cls(**copied, inputs=tuple((a, producers[a]) for a in step.inputs),
                   options=tuple((f, options[f]) for f in declared if f in options))

    def argv(self, spec: str, paths: dict[str, str],
             late: Mapping[str, str] | None = None) -> list[str]:
        """The entry point's arguments, given the spec (path or JSON) and artifact paths.

        An option whose value starts with ``-`` (Beam options: ``--direct_num_workers=2``) is
        passed as one ``--flag=value`` argument: argparse would take a separate ``--...`` value
        for an option of its own. ``late``: the run-time inputs (:data:`LATE_INPUTS`) by name;
        an option waiting for one that is not given is left out. None: placeholders kept (the
        KFP compiler's view)."""
        args = ["--spec", spec]
        for artifact, _producer in self.inputs:
            args += [f"--{self.flag(artifact)}", paths[artifact]]
        for artifact in self.outputs:
            args += [f"--{self.flag(artifact)}", paths[artifact]]
        for key, value in self.options:
            if late is not None and value.startswith("{{estflow-input:"):
                name = value[len("{{estflow-input:"):-2]
                if name not in late:
                    continue
                value = late[name]
            args += [f"--{key}={value}"] if value.startswith("-") else [f"--{key}", value]
        return args

    def plan_step(self) -> StepKeyInput:
        """What keying this step needs (:class:`estflow.dsl.fingerprints.StepKeyInput`). Left
        out of its options: those still waiting for a run-time value or a KFP parameter, and
        the source root (where the data is; the source's fingerprint says what it is)."""
        return StepKeyInput(name=self.name, inputs=self.inputs, outputs=self.outputs,
                            reads=self.reads, side_effects=self.side_effects,
                            module=self.module,
                            options=tuple((k, v) for k, v in self.options
                                          if "{{estflow-" not in v and k != "source-root"))


@dataclasses.dataclass(frozen=True)
class Plan:
    """The steps, in order; ``fingerprint``: the step that keys them, run before them (None:
    a plan whose steps are never reused, e.g. ``estflow preprocess``)."""

    pipeline: Pipeline
    steps: tuple[PlannedStep, ...]
    fingerprint: PlannedStep | None = None

    def step(self, name: str) -> PlannedStep:
        return next(s for s in self.steps if s.name == name)


def build_plan(pipeline: Pipeline, *, source_root: str,
               beam_options: str | None = None, sdk_image: str | None = None,
               steps: Sequence[Step] | None = None) -> Plan:
    """Plan the steps of ``pipeline``.

    Args:
        pipeline: a validated Pipeline.
        source_root: where relative data paths resolve: a directory, or ``module:pkg.mod``
            (the directory of an installed module, used in containers); passed to the steps
            that declare ``--source-root``.
        beam_options: Beam pipeline options, one string, for the Beam steps (``Step.beam``:
            ``--beam-options``); None: they run on the in-memory FnApiRunner.
        sdk_image: the image a non-local Beam runner's workers run (``--sdk-image`` of the
            Beam steps): a compiled pipeline's own image, so its workers hold the same estflow
            and tf.Transform as the task that launched them. None: the step's default.
        steps: the contract rows a training pipeline may run, in order (default:
            :data:`TRAINING_STEPS`); those whose ``needs`` the pipeline declares are planned.
            A pipeline that only predicts runs :data:`~estflow.dsl.contracts.PREDICT_ONLY`.
    """
    rows = _steps(pipeline, TRAINING_STEPS if steps is None else steps)
    plan = _plan(pipeline, with_user_steps(pipeline, rows),
                 {"source-root": source_root,
                  **({"sdk-image": sdk_image} if sdk_image else {}),
                  **{flag: late_input(name) for flag, name in LATE_INPUTS.items()}},
                 beam_options)
    return dataclasses.replace(plan, fingerprint=fingerprint_step(plan, source_root))


def fingerprint_step(plan: Plan, source_root: str) -> PlannedStep:
    """The :data:`~estflow.dsl.contracts.FINGERPRINT` step keying ``plan``'s steps."""
    return PlannedStep.from_step(FINGERPRINT, {}, {
        "source-root": source_root,
        "plan": StepKeyInput.list_to_json([s.plan_step() for s in plan.steps])})


def _steps(pipeline: Pipeline, rows: Sequence[Step]) -> tuple[Step, ...]:
    """The contract rows a pipeline runs: of ``rows``, those whose ``needs`` it declares (push
    with a push target, batch prediction with ``predict``); a pipeline that only predicts runs
    that one step."""
    if not pipeline.trains:
        return (PREDICT_ONLY,)
    return tuple(s for s in rows if s.needs is None or getattr(pipeline, s.needs) is not None)


def with_user_steps(pipeline: Pipeline, rows: Sequence[Step]) -> tuple[Step, ...]:
    """``rows`` (the built-in steps, in their order) with the pipeline's user steps placed among
    them: each as soon as the steps it runs after (its inputs' writers, its ``after``, its
    ``when``'s step) are placed, in declaration order. Each user step's key covers its own
    declaration, its upstream user steps' and the fields that make the built-in steps it needs
    exist (``push`` for the ``pushed`` artifact, ...), so its projected spec is a valid
    pipeline and editing another step's function does not rerun it."""
    # The built-in steps run one after another (validate gates transform without feeding it),
    # but for the candidates' own (side by side).
    rows = tuple(dataclasses.replace(r, after=(*r.after, rows[i - 1].name)) if i else r
                 for i, r in enumerate(rows))
    rows = with_candidates(pipeline, with_tune(pipeline, rows))
    if not pipeline.steps:
        return rows
    row_of = {r.name: r for r in rows}
    writers = {a: r.name for r in rows for a in r.outputs}
    by_name = {s.name: s for s in pipeline.steps}
    for s in pipeline.steps:
        writers.update({a: s.name for a in (s.result_artifact, *(p.name for p in s.outputs))})
    user_rows = []
    for s in pipeline.steps:
        closure: list[str] = []
        todo = [s.name]
        while todo:
            for up in upstream(by_name[todo.pop()], writers):
                if up in by_name and up not in closure and up != s.name:
                    closure.append(up)
                    todo.append(up)
        needed = {n for u in (s.name, *closure) for n in upstream(by_name[u], writers)
                  if n in row_of}
        fields = sorted({row_of[n].needs for n in needed if row_of[n].needs})
        reads = (*(f"steps.{u}" for u in sorted(closure)), *fields)
        if s.mapped:  # one row per item, then the row collecting them (named as the step)
            items = [item_row(s, i, reads=reads) for i in range(len(s.items))]
            for row in items:
                writers.update({a: row.name for a in row.outputs})
            user_rows += items
        user_rows.append(contract_row(s, reads=reads))
    if isinstance(pipeline.model, Candidates):  # "the evaluation" is the one select picked
        moved = {n: SELECT.name for n in CANDIDATE_STEPS}
        user_rows = [dataclasses.replace(
            r, after=tuple(dict.fromkeys(moved.get(a, a) for a in r.after)),
            when=(dataclasses.replace(r.when, step=SELECT.name)
                  if r.when is not None and r.when.step in moved else r.when))
            for r in user_rows]
    return _ordered(rows, user_rows, writers)


def with_tune(pipeline: Pipeline, rows: Sequence[Step]) -> tuple[Step, ...]:
    """``rows`` with the train step reading the tune step's best assignment
    (:func:`~estflow.dsl.contracts.tuned_train`) when the pipeline declares ``tune``."""
    if pipeline.tune is None:
        return tuple(rows)
    return tuple(tuned_train(r) if r.name == TRAIN.name else r for r in rows)


def with_candidates(pipeline: Pipeline, rows: Sequence[Step]) -> tuple[Step, ...]:
    """``rows`` with each of :data:`~estflow.dsl.contracts.CANDIDATE_STEPS` once per candidate
    of a :class:`~estflow.dsl.models.Candidates` model (by name), then the select step; the
    steps after them wait for (and are gated by) select instead. Unchanged for one model."""
    if not isinstance(pipeline.model, Candidates):
        return tuple(rows)
    names = sorted(pipeline.model.models)
    last = max(i for i, r in enumerate(rows) if r.name in CANDIDATE_STEPS)
    out: list[Step] = []
    for i, r in enumerate(rows):
        if r.name in CANDIDATE_STEPS:
            out += [for_candidate(r, n) for n in names]
            if i == last:
                out.append(select_row(names))
            continue
        moved = {s: SELECT.name for s in CANDIDATE_STEPS}
        out.append(dataclasses.replace(
            r, after=tuple(dict.fromkeys(moved.get(a, a) for a in r.after)),
            runs_if=moved.get(r.runs_if, r.runs_if)))
    return tuple(out)


def _ordered(rows: tuple[Step, ...], user_rows: list[Step],
             writers: Mapping[str, str]) -> tuple[Step, ...]:
    """Built-in ``rows`` in their order, each user row as early as what it waits for allows."""
    deps: dict[str, set[str]] = {r.name: set(r.after) for r in rows}
    for r in user_rows:
        deps[r.name] = ({writers[a] for a in r.inputs} | set(r.after)
                        | ({r.when.step} if r.when is not None else set()))
    order: list[Step] = []
    done: set[str] = set()
    left = [*user_rows, *rows]  # user rows first: each runs as soon as it can
    while left:
        ready = next((r for r in left if deps[r.name] <= done), None)
        if ready is None:
            raise ValueError(f"Received steps waiting on each other: "
                             f"{sorted((r.name, sorted(deps[r.name] - done)) for r in left)}")
        order.append(ready)
        done.add(ready.name)
        left.remove(ready)
    return tuple(order)


def build_preprocess_plan(pipeline: Pipeline, *, source_root: str, gzip_level: int = 1,
                          num_shards: int = 0, beam_options: str | None = None) -> Plan:
    """Plan ``estflow preprocess``: the one :data:`~estflow.dsl.contracts.PREPROCESS` step
    (ingest and transform fused into one Beam job).

    Args:
        pipeline, source_root, beam_options: as :func:`build_plan`.
        gzip_level: GZIP level of the written TFRecords (1-9).
        num_shards: shards per split (0: the runner decides).
    """
    return _plan(pipeline, (PREPROCESS,),
                 {"source-root": source_root, "gzip-level": str(gzip_level),
                  "num-shards": str(num_shards)}, beam_options)


def _plan(pipeline: Pipeline, steps: tuple[Step, ...], values: Mapping[str, str],
          beam_options: str | None) -> Plan:
    """Plan ``steps`` in order, each taking those of ``values`` it declares, and the Beam
    steps ``beam_options`` when given."""
    producers: dict[str, str] = {}
    planned: list[PlannedStep] = []
    for step in steps:
        _check_gate(step, planned)
        declared = {o.flag for o in step.options}
        options = {k: v for k, v in values.items() if k in declared}
        if step.module == USER_STEP_MODULE:  # --step (and a mapped step's --item)
            options["step"] = step.name
            options.update({o.flag: str(o.default) for o in step.options
                            if o.default is not None})
        if beam_options is not None and step.beam:
            options["beam-options"] = beam_options
        planned.append(PlannedStep.from_step(step, producers, options))
        producers.update({a: step.name for a in step.outputs})
    return Plan(pipeline=pipeline, steps=tuple(planned))


def _check_gate(step: Step, before: Sequence[PlannedStep]) -> None:
    """A step's ``runs_if`` must name an earlier planned step that returns a result."""
    if step.runs_if is None:
        return
    gate = next((s for s in before if s.name == step.runs_if), None)
    if gate is None or gate.result is None:
        raise ValueError(f"Received runs_if={step.runs_if!r} for step {step.name!r}, expected "
                         f"an earlier step with a result; the steps before it: "
                         f"{[(s.name, s.result is not None) for s in before]} (name, result)")

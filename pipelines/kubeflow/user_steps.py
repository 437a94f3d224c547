"""User steps (:mod:`estflow.dsl.steps`) as Kubeflow tasks: what the compiler needs beyond a
built-in step's row.

* :func:`declared_resources`, :func:`declared_images`: a user step declares its own
  ``resources`` and ``image``; they apply to its task as ``Pipeline.resources[step]`` and
  ``--step-image`` do to a built-in step's;
* :func:`result_types`: the KFP type of each name a user step's ``NamedTuple`` declares, returned
  by its task as an output parameter: the type of the values the pipeline's ``when``\\ s compare
  it with (``bool``, ``float`` for a number, ``str``), else ``str`` (the value, shown in the
  KFP UI; JSON text for a non-string);
* :func:`conditions`: the conditions each step's task runs under: its own ``when`` (push's: the
  blessing), plus those of every step it reads from, runs after or compares (KFP requires a
  task consuming a conditional task's outputs to sit in the same condition; locally such a step
  is skipped with it); a step whose upstream steps run under conditions that do not nest is
  refused, naming them;
* :func:`build_component`: the task's component: ``python -m estflow.components.user_step``'s
  ``main`` with the plan's argv (:mod:`.components`), its declared ``packages`` installed first,
  returning its result; with ``in_task_gate`` (KFP backends from 2.14 on, 2.17 included, where
  a ``dsl.If`` in the exit handler misreports the run's state, see :mod:`.backend`) it checks
  its conditions itself and, when one does not hold or an input was skipped, writes
  :data:`~.tasks.SKIPPED_FILE` in each output instead of running (as push does there);
* :func:`unreachable_functions`: notes for the steps whose function the task can import only
  from a local file (a pipeline file that is not an importable module).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from collections.abc import Sequence

from kfp import dsl
from kfp.dsl import python_component

from estflow.dsl.contracts import USER_STEP_MODULE
from estflow.dsl.pipeline import Pipeline
from estflow.dsl.resources import Resources
from estflow.dsl.steps import RESULT_FILE
from estflow.dsl.steps import UserStep
from estflow.dsl.steps import When
from estflow.pipelines.kubeflow import components
from estflow.pipelines.kubeflow.tasks import SKIPPED_FILE
from estflow.pipelines.plan import PlannedStep
from estflow.pipelines.plan import late_input

__all__ = ["UserStepError", "declared", "declared_resources", "declared_images",
           "with_resources", "result_types", "conditions", "gate_of", "build_component",
           "unreachable_functions", "is_user_step", "ITEM_SUFFIX", "declared_name",
           "is_item_template", "fold_items", "loop_items",
           "build_collector"]

_PYTHON_TYPES = {bool: "bool", float: "float", str: "str"}
# How a skipped task (in-task gates) fills each output parameter: KFP wants a typed value.
_SKIPPED_VALUES = {"bool": False, "float": 0.0, "str": ""}


class UserStepError(ValueError):
    """A user step the compiler cannot turn into a Kubeflow task as declared."""


def is_user_step(step: PlannedStep) -> bool:
    return step.module == USER_STEP_MODULE


def declared(pipeline: Pipeline) -> dict[str, UserStep]:
    """The pipeline's user steps by name."""
    return {s.name: s for s in pipeline.steps}


def declared_resources(pipeline: Pipeline) -> dict[str, Resources]:
    """Step -> its task's declared resources: ``Pipeline.resources`` (built-in steps) and each
    user step's own ``resources``."""
    return {**pipeline.resources,
            **{s.name: s.resources for s in pipeline.steps if s.resources is not None}}


def declared_images(pipeline: Pipeline) -> dict[str, str]:
    """User step -> the ``image`` it declares."""
    return {s.name: s.image for s in pipeline.steps if s.image is not None}


def with_resources(pipeline: Pipeline, resources: Mapping[str, Resources]) -> Pipeline:
    """``pipeline`` with ``resources`` (as :func:`declared_resources` returns them, adapted)
    put back: the built-in steps' into ``Pipeline.resources``, the user steps' into theirs."""
    users = declared(pipeline)
    steps = tuple(dataclasses.replace(s, resources=resources[s.name])
                  if s.name in resources else s for s in pipeline.steps)
    return dataclasses.replace(
        pipeline, steps=steps,
        resources={k: v for k, v in resources.items() if k not in users})


def _kind(value) -> str:
    return "bool" if isinstance(value, bool) else "float" if isinstance(
        value, (int, float)) else "str"


def result_types(pipeline: Pipeline) -> dict[str, dict[str, str]]:
    """User step -> (declared result name -> KFP type name: ``bool``, ``float``, ``str`` for a
    compared string, ``text`` for a name no ``when`` compares, output as ``str``).

    Raises:
        UserStepError: two ``when``\\ s compare one name with values of different types.
    """
    users = declared(pipeline)
    compared: dict[tuple[str, str], tuple[str, str]] = {}  # (step, key) -> (kind, by step)
    for s in pipeline.steps:
        w = s.when
        if w is None or w.step not in users:
            continue
        kind = _kind(w.value)
        seen = compared.setdefault((w.step, w.key), (kind, s.name))
        if seen[0] != kind:
            raise UserStepError(
                f"Received steps {seen[1]!r} and {s.name!r} comparing {w.step}.{w.key} with a "
                f"{seen[0]} and a {kind}, expected values of one type (its Kubeflow task "
                f"returns {w.key!r} as one typed output parameter)")
    return {s.name: {k: compared.get((s.name, k), ("text", ""))[0] for k in s.returns}
            for s in pipeline.steps}


def gate_of(plan_step: PlannedStep, plan_steps: Mapping[str, PlannedStep]) -> When | None:
    """The condition ``plan_step`` itself runs under: its ``when``, or for a built-in step that
    ``runs_if`` another (push), that step's result being true."""
    if plan_step.when is not None:
        return plan_step.when
    if plan_step.runs_if is not None:
        return When(plan_step.runs_if, plan_steps[plan_step.runs_if].result.key, "==", True)
    return None


def upstream_steps(plan_step: PlannedStep) -> list[str]:
    """The steps ``plan_step`` reads from, runs after or compares (its DAG parents)."""
    found = [producer for _artifact, producer in plan_step.inputs]
    found += list(plan_step.after)
    if plan_step.when is not None:
        found.append(plan_step.when.step)
    if plan_step.runs_if is not None:
        found.append(plan_step.runs_if)
    return list(dict.fromkeys(found))


def conditions(steps: Sequence[PlannedStep]) -> dict[str, tuple[When, ...]]:
    """Step -> the conditions its task runs under, outermost first (see the module doc).

    Raises:
        UserStepError: a step's upstream steps run under conditions that do not nest (KFP
            cannot place it in both).
    """
    by_name = {s.name: s for s in steps}
    chains: dict[str, tuple[When, ...]] = {}
    for step in steps:
        chain: tuple[When, ...] = ()
        source = None
        for up in upstream_steps(step):
            theirs = chains.get(up, ())
            if theirs[:len(chain)] == chain:
                chain, source = theirs, up
            elif chain[:len(theirs)] != theirs:
                raise UserStepError(
                    f"Received step {step.name!r} reading from step {source!r} (which runs "
                    f"only when {' and '.join(map(str, chain))}) and step {up!r} (only when "
                    f"{' and '.join(map(str, theirs))}), expected upstream steps under "
                    f"conditions that nest: on Kubeflow a step reading a conditional step's "
                    f"outputs runs inside that step's condition, and {step.name!r} cannot be "
                    f"inside both; give {step.name!r} (or one of them) the other's `when`, or "
                    f"split {step.name!r} in two")
        own = gate_of(step, by_name)
        if own is not None and own not in chain:
            chain = (*chain, own)
        chains[step.name] = chain
    return chains


def _result_lines(step: UserStep, types: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """The return annotation and lines returning ``step``'s result names (read from its
    ``result.json``), each checked against its type."""
    if not step.returns:
        return "", ()
    fields = ", ".join(f"({k!r}, {'str' if types[k] == 'text' else types[k]})"
                       for k in step.returns)
    annotation = f"NamedTuple('Outputs', [{fields}])"
    artifact = step.result_artifact
    lines = (
        "import json",
        "import os",
        "from typing import NamedTuple",
        f"_ef_file = os.path.join({artifact}.path, {RESULT_FILE!r})",
        "with open(_ef_file) as f:",
        "    _ef_found = json.load(f)",
        "_ef_values = []",
        f"for _ef_name, _ef_kind in {tuple((k, types[k]) for k in step.returns)!r}:",
        "    _ef_value = _ef_found.get(_ef_name)",
        "    if _ef_kind == 'text':",
        "        _ef_value = _ef_value if isinstance(_ef_value, str) else json.dumps(_ef_value)",
        "    elif not (isinstance(_ef_value, bool) if _ef_kind == 'bool' else",
        "              isinstance(_ef_value, str) if _ef_kind == 'str' else",
        "              isinstance(_ef_value, (int, float)) and not isinstance(_ef_value, bool)):",
        f"        raise TypeError('estflow step {step.name}: its result %s is %r, expected a %s "
        "(a when of the pipeline compares it with one)' % (_ef_name, _ef_value, _ef_kind))",
        "    _ef_values.append(_ef_value)",
        f"print('estflow step {step.name}: result ' + ', '.join("
        f"'%s=%r' % kv for kv in zip({step.returns!r}, _ef_values)))",
        f"return {annotation}(*_ef_values)",
    )
    return annotation, lines


def gate_inputs(step: PlannedStep, plan_steps: Mapping[str, PlannedStep]) -> list[str]:
    """The artifacts an in-task gated ``step`` also takes (besides its inputs), to tell whether
    the steps it runs after or compares were skipped: each one's first output (a user step's:
    its result)."""
    names = [*step.after, *([step.when.step] if step.when is not None else [])]
    found = []
    for name in names:
        upstream = plan_steps[name]
        if upstream.result is not None and not is_user_step(upstream):
            continue  # a built-in step with a result (evaluate) is never skipped
        artifact = upstream.outputs[0]
        if artifact not in found and artifact not in dict(step.inputs):
            found.append(artifact)
    return found


def _guard_lines(step: PlannedStep, user: UserStep, gate_artifacts: Sequence[str],
                 builtin_gate: tuple[str, When] | None, types: Mapping[str, str]) -> list[str]:
    """The lines skipping the step (in-task gates): an input or gate artifact holding
    :data:`SKIPPED_FILE`, or its ``when`` not holding."""
    checked = [a for a, _ in step.inputs] + list(gate_artifacts)
    outputs = list(step.outputs)
    when = step.when  # as planned (with Candidates, "evaluate" is select)
    lines = ["    import json",
             "    import operator",
             "    import os",
             "    _ef_reason = None",
             f"    for _ef_name, _ef_artifact in ({''.join(f'({a!r}, {a}), ' for a in checked)}):",
             f"        if os.path.isfile(os.path.join(_ef_artifact.path, {SKIPPED_FILE!r})):",
             "            _ef_reason = 'its input %s was not written (its step was skipped)' % "
             "_ef_name",
             "            break"]
    if when is not None:
        op = {"==": "eq", "!=": "ne", ">": "gt", ">=": "ge", "<": "lt", "<=": "le"}[when.op]
        if builtin_gate is not None:
            key = builtin_gate[0]
            lines += [f"    _ef_found = {key}"]
        else:
            result = f"{when.step}_result"
            lines += [f"    _ef_file = os.path.join({result}.path, {RESULT_FILE!r})",
                      "    _ef_found = None",
                      "    if _ef_reason is None and os.path.isfile(_ef_file):",
                      "        with open(_ef_file) as f:",
                      f"            _ef_found = json.load(f).get({when.key!r})"]
        lines += ["    try:",
                  f"        _ef_holds = bool(operator.{op}(_ef_found, {when.value!r}))",
                  "    except TypeError:",
                  "        _ef_holds = False",
                  "    if _ef_reason is None and not _ef_holds:",
                  "        _ef_reason = "
                  + repr(f"its condition {when} does not hold ({when.step}.{when.key} = ")
                  + " + repr(_ef_found) + ')'"]
    skipped = tuple(_SKIPPED_VALUES["str" if types[k] == "text" else types[k]]
                    for k in user.returns)
    lines += ["    if _ef_reason is not None:",
              f"        print('estflow step {step.name}: skipped: ' + _ef_reason)",
              f"        for _ef_output in ({''.join(o + ', ' for o in outputs)}):",
              "            os.makedirs(_ef_output.path, exist_ok=True)",
              f"            with open(os.path.join(_ef_output.path, {SKIPPED_FILE!r}), 'w') "
              "as f:",
              "                json.dump({'skipped': True, 'reason': _ef_reason}, f)",
              f"        return{' ' + repr(skipped) if user.returns else ''}"]
    return lines


def build_component(step: PlannedStep, user: UserStep, image: str, *, keyed: bool,
                    types: Mapping[str, str], in_task_gate: bool = False,
                    plan_steps: Mapping[str, PlannedStep] | None = None,
                    ) -> python_component.PythonComponent:
    """The component of user step ``step`` (its declaration ``user``) in ``image``: the plan's
    argv, its ``packages`` installed before it runs, its result names returned as output
    parameters (typed by ``types``, :func:`result_types`); ``in_task_gate``: it takes its
    gates as inputs and skips itself (see the module doc).

    Raises:
        UserStepError: a result name is also the name of one of its artifacts.
    """
    clash = sorted(set(user.returns) & {*dict(step.inputs), *step.outputs})
    if clash:
        raise UserStepError(f"Received step {step.name!r} returning {clash}, expected result "
                            f"names other than its artifacts' (its Kubeflow task has one "
                            f"output per name)")
    result = _result_lines(user, types)
    source = components.render_source(step, keyed=keyed, result=result)
    if in_task_gate:
        plan_steps = plan_steps or {}
        artifacts = gate_inputs(step, plan_steps)
        when = step.when  # as planned (with Candidates, "evaluate" is select)
        builtin = None
        if when is not None and not is_user_step(plan_steps[when.step]):
            builtin = (plan_steps[when.step].result.key, when)
        lines = source.split("\n")
        body = next(i for i, line in enumerate(lines) if line.startswith(")")) + 2
        extra = [f"    {builtin[0]}: bool,"] if builtin else []
        extra += [f"    {a}: Input[Artifact]," for a in artifacts]
        guard = _guard_lines(step, user, artifacts, builtin, types)
        source = "\n".join([lines[0], *extra, *lines[1:body], *guard, *lines[body:]])
    return dsl.component(components.define(step.name, source), base_image=image,
                         install_kfp_package=False,
                         packages_to_install=list(user.packages) or None)


def unreachable_functions(pipeline: Pipeline) -> list[str]:
    """A note per user step whose function its Kubeflow task can import only from a local
    file: one defined in a pipeline file that is not an importable module (its reference
    carries the file's path on this machine, which an image has only if built so)."""
    notes = []
    for s in pipeline.steps:
        if not s.fn.file:  # set only for a file the loader ran as a script (not importable)
            continue
        notes.append(
            f"step {s.name!r}: its function {s.fn.name} is defined in {s.fn.file}, which is not "
            f"an importable module, so its Kubeflow task loads it from that path, which the "
            f"image may not have (as for a model_fn or derive function); put the pipeline "
            f"file in a package installed in the image and compile it as package.module, or "
            f"define the step in such a package")
    return notes


# --- fan-out: a mapped step as a dsl.ParallelFor ------------------------------------------------

ITEM_SUFFIX = "_item"
"""A mapped step ``score``'s items run as one task template ``score_item`` in a
``dsl.ParallelFor``; its task ``score`` collects them (``dsl.Collected``)."""


def declared_name(step: PlannedStep) -> str:
    """The user step a planned user step runs (its ``--step``): itself, an item's mapped step."""
    return dict(step.options).get("step", step.name)


def is_item_template(step: PlannedStep) -> bool:
    return is_user_step(step) and dict(step.options).get("item") == late_input("item")


def fold_items(steps: Sequence[PlannedStep], pipeline: Pipeline,
               ) -> tuple[tuple[PlannedStep, ...], dict[str, list[str]]]:
    """``steps`` with each mapped step's item steps (``score_0`` ...) replaced by one template
    ``score_item`` (at the first item's place: ``--item`` a run-time input, its outputs by the
    step's own names, ``--score_result``, ``--scores``, which the entry point takes for the
    item's) and its collecting step reading the template's outputs; and template -> the item
    steps it stands for (in order: what the fingerprint task lists per iteration)."""
    mapped = {s.name: s for s in pipeline.steps if s.mapped}
    if not mapped:
        return tuple(steps), {}
    by_name = {s.name: s for s in steps}
    folded: list[PlannedStep] = []
    items: dict[str, list[str]] = {}
    for step in steps:
        name = declared_name(step) if is_user_step(step) else None
        if name in mapped and step.name != name:  # an item
            template = name + ITEM_SUFFIX
            if template not in items:
                user = mapped[name]
                items[template] = [f"{name}_{i}" for i in range(len(user.items))]
                folded.append(dataclasses.replace(
                    step, name=template,
                    outputs=(user.result_artifact, *(p.name for p in user.outputs)),
                    options=(("step", name), ("item", late_input("item"))),
                    description=f"{user.fn} (a user step: one item of {len(user.items)}, "
                                "in a ParallelFor)"))
            continue
        if name in mapped:  # the collecting step: reads the template's outputs, collected
            template = by_name[f"{name}_0"]
            folded.append(dataclasses.replace(step, inputs=tuple(
                (a, name + ITEM_SUFFIX) for a in (
                    mapped[name].result_artifact, *(p.name for p in mapped[name].outputs)))))
            continue
        folded.append(step)
    return tuple(folded), items


def loop_items(fingerprint, template: str, count: int, keyed: bool, image: str):
    """What ``template``'s ParallelFor iterates over: the fingerprint task's ``<template>s``
    output (each item's index, spec and cache key), passed through a one-output task
    ``<template>s`` (kfp.local 2.17 resolves a ParallelFor's items from a task's output only
    when that output is its single ``Output``); or without a fingerprint task the constant list
    of ``{"index": ...}``."""
    if not keyed:
        return [{"index": str(i)} for i in range(count)]
    source = (f"def {template}s(items: list) -> list:\n"
              f"    {repr(f'estflow: the items of mapped step {template}.')}\n"
              "    return items\n")
    component = dsl.component(components.define(f"{template}s", source), base_image=image,
                              install_kfp_package=False)
    task = component(items=fingerprint.outputs[f"{template}s"])
    task.set_caching_options(False)
    return task.output


def build_collector(step: PlannedStep, user: UserStep, image: str, *,
                    keyed: bool) -> python_component.PythonComponent:
    """The component of mapped step ``user``'s collecting task: each of its template's outputs
    ``a`` collected as input ``a_list`` (``Input[List[...]]``, one per item, in order), passed
    to ``python -m estflow.components.user_step --step NAME`` as ``--a_0 ... --a_<n-1>``."""
    collected = [a for a, _ in step.inputs]
    kinds = dict.fromkeys((*collected, *step.outputs), "Artifact")  # as a user step's task's
    signature = ["spec: str", *([f"{components.CACHE_KEY}: str"] if keyed else []),
                 *(f"{a}_list: Input[List[{kinds[a]}]]" for a in collected),
                 *(f"{a}: Output[{kinds[a]}]" for a in step.outputs)]
    item_name = {user.result_artifact: f"'{user.name}_%d_result'",
                 **{p.name: f"'{p.name}_%d'" for p in user.outputs}}
    lines = [f"def {step.name}(", *(f"    {s}," for s in signature), "):",
             f"    {repr(f'estflow step {step.name}: {step.description}.')}",
             *([f"    print('estflow step {step.name}: cache key %s' % {components.CACHE_KEY})"]
               if keyed else []),
             "    from estflow.components import user_step as step",
             "    argv = ['--spec', spec]"]
    for a in collected:
        lines += [f"    for i, found in enumerate({a}_list):",
                  f"        argv += ['--' + {item_name[a]} % i, found.path]"]
    lines += [f"    argv += [{', '.join(f'{chr(39)}--{a}{chr(39)}, {a}.path' for a in step.outputs)}]",
              f"    argv += ['--step', {user.name!r}]",
              "    exit_code = step.main(argv)",
              "    if exit_code:",
              f"        raise RuntimeError('estflow step {step.name} exited with code %s' % "
              "exit_code)",
              ""]
    source = "from typing import List\n" + "\n".join(lines)
    return dsl.component(components.define(step.name, source), base_image=image,
                         install_kfp_package=False)


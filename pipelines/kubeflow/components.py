"""One KFP lightweight Python component per planned step, generated from the Plan.

A task's body is a few lines of Python that KFP ships inside the task's command::

    def train(spec: str, transformed: Input[Dataset], model: Output[Model]):
        from estflow.components import train as step
        exit_code = step.main(['--spec', spec, '--transformed', transformed.path,
                               '--model', model.path])
        if exit_code:
            raise RuntimeError(...)

The argument list is :meth:`PlannedStep.argv` evaluated with placeholders, so a KFP task and a
local run call the same entry point with the same arguments, and the Plan stays the only place
that knows them. Lightweight (not container) components, because ``kfp.local.SubprocessRunner``
runs only those; ``install_kfp_package=False`` because the estflow image already has kfp.

A step may also return a parameter (its contract row's ``result``: :func:`result_of`): evaluate
returns whether the model is blessed, read from the blessing it wrote, and the compiler runs push
only when it is.

A step may also have outputs for the KFP UI only (its row's ``ui_outputs``: :func:`ui_outputs`),
filled from files the step wrote: evaluate logs ``metrics`` (``system.Metrics``: the scalar metrics of
``kfp_metrics.json``), ``classification`` (``system.ClassificationMetrics``: ROC curve and
confusion matrix of ``kfp_classification.json``; empty for regression) and ``html_report``
(``system.HTML``: ``report.html``), which the run page shows as metrics, plots and the report.

This module writes Python source, which is why it never imports ``estflow.components``: the
generated code does, inside the container.
"""

from __future__ import annotations

import hashlib
import linecache
import os
import re
import typing
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence

from kfp import dsl
from kfp.dsl import python_component

from estflow.dsl.contracts import Files
from estflow.dsl.contracts import UiOutput
from estflow.dsl.contracts import artifact_role
from estflow.pipelines.plan import PlannedStep

__all__ = ["ARTIFACT_TYPES", "UI_TYPES", "PARAMETERS", "RESULT_OUTPUT", "CACHE_KEY",
           "param_placeholder", "ui_outputs", "result_of", "fingerprint_result",
           "build_component", "render_source", "define"]

# Artifact name (dsl/contracts.py) -> KFP artifact type. Directories all; the types only tell
# the KFP UI and lineage what each one is. An artifact missing here is a plain Artifact.
ARTIFACT_TYPES: dict[str, type] = {
    "examples": dsl.Dataset,
    "transformed": dsl.Dataset,
    "model": dsl.Model,
    "evaluation": dsl.Artifact,  # metrics.json + blessing; the UI's views: UI_OUTPUTS
    "pushed": dsl.Artifact,
    "predictions": dsl.Dataset,  # predict.json (+ the predictions without BatchPredict.output)
}

# UiOutput.kind (dsl/contracts.py) -> the KFP artifact type of a step's output for the KFP UI,
# logged by the lines of _ui_logging after ``main`` succeeded (not part of the Plan: local
# runs have the files).
UI_TYPES: dict[str, type] = {"metrics": dsl.Metrics, "classification": dsl.ClassificationMetrics,
                             "html": dsl.HTML}
# What each kind's logging does with the file (variable ``{file}``) into the output (``{out}``): what
# components.evaluate.log_to_kfp does, inline, since the task must not depend on more of the
# step module than ``main`` (a test checks both log the same metadata).
_UI_LINES: dict[str, tuple[str, ...]] = {
    "metrics": (
        "    with open({file}) as f:",
        "        for name, value in sorted(json.load(f).items()):",
        "            {out}.log_metric(name, value)",
    ),
    "classification": (
        "    with open({file}) as f:",
        "        plots = json.load(f)",
        "    if 'roc' in plots:",
        "        roc = plots['roc']",
        "        {out}.log_roc_curve(roc['fpr'], roc['tpr'], roc['thresholds'])",
        "    if 'confusion_matrix' in plots:",
        "        matrix = plots['confusion_matrix']",
        "        {out}.log_confusion_matrix(matrix['categories'], matrix['matrix'])",
    ),
    "html": ("    shutil.copyfile({file}, {out}.path)",),
}

# Pipeline parameters a step's argv may use (string-typed, in this order in each signature).
PARAMETERS = ("spec", "source_root", "beam_options")

# A step's Result (dsl/contracts.py) is returned as one unnamed value, so KFP names the output
# "Output": kfp.local 2.17 evaluates a condition only on outputs named "<task>-Output" or
# "<task>--<key>" (enhanced_dag_orchestrator's ConditionEvaluator), so a named "blessed" output
# would skip push under kfp.local.
RESULT_OUTPUT = "Output"

_PLACEHOLDER = re.compile(r"\{\{estflow-(param|path|input):(\w+)\}\}")

# The input every step task takes besides its argv's: its cache key, computed by the
# fingerprint task; KFP's cache key covers a task's inputs, so the task is reused exactly when
# the step's key (data, spec part, code, input artifacts) is that of an earlier run.
CACHE_KEY = "cache_key"
_NAMESPACE = {"Input": dsl.Input, "Output": dsl.Output, "Artifact": dsl.Artifact,
              "Dataset": dsl.Dataset, "Model": dsl.Model, "Metrics": dsl.Metrics,
              "ClassificationMetrics": dsl.ClassificationMetrics, "HTML": dsl.HTML,
              "NamedTuple": typing.NamedTuple,
              "PipelineTaskFinalStatus": dsl.PipelineTaskFinalStatus}


def param_placeholder(name: str) -> str:
    """The string standing for pipeline parameter ``name`` in a Plan built for KFP."""
    if name not in PARAMETERS:
        raise ValueError(f"Received an invalid value for `name`, expected one of {PARAMETERS}. "
                         f"Received: name={name!r}")
    return "{{estflow-param:" + name + "}}"


def _path_placeholder(artifact: str) -> str:
    return "{{estflow-path:" + artifact + "}}"


def ui_outputs(step: PlannedStep) -> tuple[tuple[str, type], ...]:
    """(output name, KFP artifact type) of each of ``step``'s outputs for the KFP UI."""
    return tuple((o.name, UI_TYPES[o.kind]) for o in step.ui_outputs)


def _variable(file: str) -> str:
    """The generated code's variable holding the path of ``file`` (its stem)."""
    return os.path.splitext(file)[0]


def _ui_logging(outputs: tuple[UiOutput, ...]) -> tuple[str, ...]:
    """The lines filling ``outputs`` from their files, each when its file exists; then each
    metadata output also written as a file: a cache (kfp.local's) reuses a task only while its
    outputs' files exist."""
    if not outputs:
        return ()
    kinds = {o.kind for o in outputs}
    lines = [*(["import json"] if kinds - {"html"} else []), "import os",
             *(["import shutil"] if "html" in kinds else [])]
    for output in outputs:
        file = _variable(output.file)
        lines += [f"{file} = os.path.join({output.artifact}.path, {output.file!r})",
                  f"if os.path.isfile({file}):",
                  *(line.format(file=file, out=output.name) for line in _UI_LINES[output.kind])]
    logged = [o.name for o in outputs if o.kind != "html"]
    if logged:
        lines += [f"for logged in ({', '.join(logged)}{',' if len(logged) == 1 else ''}):",
                  "    with open(logged.path, 'w') as f:",
                  "        json.dump(logged.metadata, f, sort_keys=True)"]
    return tuple(lines)


def result_of(step: PlannedStep) -> tuple[str, tuple[str, ...]]:
    """The return annotation and the lines returning ``step``'s
    :class:`~estflow.dsl.contracts.Result`, run after ``main`` succeeded (none without one)."""
    if step.result is None:
        return "", ()
    artifact, file, key = step.result.artifact, step.result.file, step.result.key
    variable = _variable(file)
    return "bool", (
        "import json",
        "import os",
        f"{variable} = os.path.join({artifact}.path, {file!r})",
        f"if not os.path.isfile({variable}):",
        f"    raise RuntimeError('estflow step {step.name} wrote no {file}')",
        f"with open({variable}) as f:",
        f"    {key} = json.load(f)[{key!r}]",
        f"if not isinstance({key}, bool):",
        f"    raise TypeError('{file}: {key} is not a bool: %r' % ({key},))",
        f"print('estflow step {step.name}: {key}=%s' % {key})",
        f"return {key}",
    )


def build_component(step: PlannedStep, image: str, *, keyed: bool = False,
                    result: tuple[str, tuple[str, ...]] | None = None,
                    ) -> python_component.PythonComponent:
    """The KFP component running ``step`` in ``image``; its inputs are the pipeline parameters
    the step's argv uses, its run-time inputs (``{{estflow-input:NAME}}`` options), then its
    input artifacts, then its output artifacts (see :func:`render_source`)."""
    return dsl.component(define(step.name, render_source(step, keyed=keyed, result=result)),
                         base_image=image, install_kfp_package=False)


def fingerprint_result(steps: list[str], items: Mapping[str, Sequence[str]] | None = None,
                       candidates: Mapping[str, tuple[str, str]] | None = None,
                       ) -> tuple[str, tuple[str, ...]]:
    """The fingerprint task's return (annotation, lines): per step ``<step>_spec`` (the part of
    the spec the step gets) and ``<step>_key`` (its cache key), ``model_fingerprint`` and
    ``source_digest`` (empty for a source without one); and per mapped step's item template
    in ``items`` (template -> the planned item steps), ``<template>s``: a list of ``{"index",
    "spec", "key"}``, one per item (a ``dsl.ParallelFor``'s items); with ``candidates``
    (candidate -> (its train step, its model artifact)), ``candidate_fingerprints``: a JSON
    object of each candidate's model fingerprint (the select task's input)."""
    items = items or {}
    names = [f"{s}_{part}" for s in steps for part in ("spec", "key")] + [
        "model_fingerprint", "source_digest"] + (
        ["candidate_fingerprints"] if candidates else [])
    fields = ", ".join([*(f"('{n}', str)" for n in names),
                        *(f"('{t}s', list)" for t in items)])
    annotation = f"NamedTuple('Outputs', [{fields}])"
    per_item = (
        f"for names in {[list(v) for v in items.values()]!r}:",
        "    values.append([{'index': str(i), 'spec': keyed[n]['spec'], 'key': keyed[n]['key']}",
        "                   for i, n in enumerate(names)])",
    ) if items else ()
    lines = (
        "import json",
        "import os",
        "from typing import NamedTuple",
        f"with open(os.path.join(fingerprints.path, {Files.FINGERPRINTS!r})) as f:",
        "    found = json.load(f)",
        "keyed = found['steps']",
        "values = []",
        f"for name in {list(steps)!r}:",
        "    values += [keyed[name]['spec'], keyed[name]['key']]",
        "model = [k['outputs']['model'] for k in keyed.values() if 'model' in k['outputs']]",
        "values.append(model[0] if model else '')",
        "values.append((found.get('source') or {}).get('digest') or '')",
        *((f"values.append(json.dumps({{c: keyed[t]['outputs'][a] for c, (t, a) in "
           f"{dict(candidates)!r}.items()}}, sort_keys=True))",) if candidates else ()),
        *per_item,
        f"print('estflow step fingerprint: keys ' + ', '.join("
        f"'%s %s' % (n, keyed[n]['key'][:12]) for n in {list(steps)!r}))",
        f"return NamedTuple('Outputs', [{fields}])(*values)",
    )
    return annotation, lines


def render_source(step: PlannedStep, *, keyed: bool = False,
                  result: tuple[str, tuple[str, ...]] | None = None) -> str:
    """The Python source of the component function for ``step`` (deterministic).

    Args:
        keyed: the task also takes :data:`CACHE_KEY` (its cache key, logged).
        result: the return annotation and the lines computing it (default: the step's
            :data:`RESULTS` entry, if any).
    """
    argv = step.argv(param_placeholder("spec"),
                     {a: _path_placeholder(a) for a in _artifacts(step)})
    params = [p for p in PARAMETERS if param_placeholder(p) in argv]
    late = [m.group(2) for arg in argv if (m := _PLACEHOLDER.fullmatch(arg))
            and m.group(1) == "input"]
    signature = [f"{p}: str" for p in params]
    signature += [f"{name}: str" for name in late]
    signature += [f"{CACHE_KEY}: str"] if keyed else []
    signature += [f"{a}: Input[{_type_name(a)}]" for a, _ in step.inputs]
    signature += [f"{a}: Output[{_type_name(a)}]" for a in step.outputs]
    signature += [f"{name}: Output[{kind.__name__}]" for name, kind in ui_outputs(step)]
    package, _, module = step.module.rpartition(".")
    failure = f"estflow step {step.name} exited with code %s"
    returns, result = result or result_of(step)
    lines = [f"def {step.name}(", *(f"    {s}," for s in signature),
             f"){' -> ' + returns if returns else ''}:",
             f"    {_docstring(step)}",
             *([f"    print('estflow step {step.name}: cache key %s' % {CACHE_KEY})"]
               if keyed else []),
             f"    from {package} import {module} as step",
             "    exit_code = step.main([",
             *(f"        {line}," for line in _argv_lines(argv, step.name)),
             "    ])",
             "    if exit_code:",
             f"        raise RuntimeError({failure!r} % exit_code)",
             *(f"    {line}" for line in _ui_logging(step.ui_outputs)),
             *(f"    {line}" for line in result),
             ""]
    return "\n".join(lines)


def _argv_lines(argv: list[str], step: str) -> list[str]:
    """argv as Python expressions, each ``--flag`` on one line with its value."""
    lines: list[str] = []
    after_flag = False
    for arg in argv:
        expression = _expression(arg, step)
        if after_flag and not arg.startswith("--"):
            lines[-1] += ", " + expression
            after_flag = False
        else:
            lines.append(expression)
            after_flag = arg.startswith("--")
    return lines


def _artifacts(step: PlannedStep) -> list[str]:
    return [a for a, _ in step.inputs] + list(step.outputs)


def _type_name(artifact: str) -> str:
    """The KFP type of ``artifact`` (a candidate's ``model_linear`` is a model)."""
    return ARTIFACT_TYPES.get(artifact_role(artifact), dsl.Artifact).__name__


def _expression(arg: str, step: str) -> str:
    """Python expression for one argv element: a parameter, an artifact's path, or a literal."""
    match = _PLACEHOLDER.fullmatch(arg)
    if match:
        kind, name = match.groups()
        return f"{name}.path" if kind == "path" else name
    if "{{estflow-" in arg:
        raise ValueError(f"Received an invalid argv element for step {step!r}, expected a "
                         f"placeholder on its own or a literal. Received: {arg!r}")
    return repr(arg)


def _docstring(step: PlannedStep) -> str:
    return repr(f"estflow step {step.name}: {step.description}.")


def define(name: str, source: str) -> Callable:
    """Execute generated ``source`` and return its function ``name``.

    KFP reads a lightweight component's code with ``inspect.getsource``; registering the
    source in ``linecache`` (as attrs does for its generated methods) makes that work for a
    function that has no file. The name carries a hash of the source, so two different
    sources never share an entry.
    """
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    filename = f"<estflow-kfp-component {name} {digest}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = dict(_NAMESPACE, __name__=__name__)
    # dont_inherit: this module's `from __future__ import annotations` would turn the
    # generated annotations into strings, which KFP cannot read.
    exec(compile(source, filename, "exec", dont_inherit=True), namespace)
    return namespace[name]

"""User steps: a plain Python function declared as a step of the pipeline's DAG.

A step is one decorated function. Its parameters say what it consumes and produces:

* ``name: Input[Kind]``: an artifact it reads, by name: one of estflow's own (``examples``,
  ``validation``, ``transformed``, ``model``, ``evaluation``, ``pushed``, ``predictions``) or
  an output of another user step. The function gets the artifact's directory (a
  :class:`pathlib.Path`).
* ``name: Output[Kind]``: an artifact it writes: the function gets an empty directory to fill.
* any other parameter: a JSON value (str, int, float, bool, None, lists and dicts of them),
  given when the step is declared (``write_scores(table="daily")``) or left at its default.

It may return a mapping (or a ``typing.NamedTuple``) of JSON scalars: its *result*, recorded as
the step's metrics in the run's record, and what a later step's ``when`` compares. Declare the
result's names with a ``NamedTuple`` return annotation so that a ``when`` on them is checked
before anything runs.

Where it runs follows from what it consumes (after the steps that write its inputs); ``after``
adds an order without data. ``when`` runs it only when an upstream value compares true
(:func:`blessed`, :func:`result`); a step that does not run is *skipped*, and so is every step
reading its outputs. Like a built-in step, a user step is keyed by what it reads (its function's
source and helpers, its inputs' fingerprints, its parameters), so a rerun with nothing changed
reuses it; ``cache=False`` runs it every time (a step acting on the world: a notification).

Nothing here imports the function's own dependencies: the decorator reads its signature only;
the step's process (``python -m estflow.components.user_step``) imports and calls it.

Example:
    >>> import estflow.dsl as ef
    >>> @ef.step
    ... def count_rows(predictions: ef.Input[ef.Predictions], report: ef.Output[ef.Markdown],
    ...                title: str = "Scores") -> dict:
    ...     return {"rows": 0}
    >>> declared = count_rows(title="Daily scores")
    >>> declared.name, [p.name for p in declared.inputs], [p.name for p in declared.outputs]
    ('count_rows', ['predictions'], ['report'])
    >>> declared.arguments()
    {'title': 'Daily scores'}
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import json
import keyword
import math
import re
import typing
from collections.abc import Callable
from collections.abc import Mapping
from collections.abc import Sequence
from typing import Any

from estflow.dsl.contracts import USER_STEP_MODULE
from estflow.dsl.contracts import Option
from estflow.dsl.contracts import Step
from estflow.dsl.errors import DslError
from estflow.dsl.refs import CallableRef
from estflow.dsl.refs import as_ref
from estflow.dsl.resources import Resources
from estflow.dsl.serialization import serializable

__all__ = ["ArtifactKind", "Input", "Output", "step", "StepFunction", "UserStep", "Port",
           "When", "blessed", "result", "BUILTIN_ARTIFACTS", "ARTIFACT_KINDS", "RESULT_FILE",
           "result_artifact", "OPERATORS", "as_user_step", "graph_errors", "upstream", "contract_row",
           "item_row", "item_name", "ITEMS_FILE",
           "Examples", "Validation", "Transformed", "TrainedModel", "Evaluation", "Pushed",
           "Predictions", "Dataset", "ModelDir", "Metrics", "HTML", "Markdown", "Artifact"]


class Artifact:
    """The kind of an artifact: any files. As an input's kind (``Input[ef.Artifact]``) it takes
    an artifact of any kind; the other kinds are its subclasses. estflow's own kinds name the
    built-in artifact they are (``builtin``); the others are what user steps write.

    Example:
        >>> import estflow.dsl as ef
        >>> ef.Artifact.builtin, ef.Evaluation.builtin, issubclass(ef.Dataset, ef.Artifact)
        (None, 'evaluation', True)
    """

    builtin: str | None = None
    kfp_type: str = "system.Artifact"


class Examples(Artifact):
    """The ingest step's output: ``train/`` and ``eval/`` TFRecords of raw tf.Examples, and
    ``statistics.pb``.

    Example:
        >>> import estflow.dsl as ef
        >>> ef.Input[ef.Examples]
        Input[Examples]
    """

    builtin = 'examples'
    kfp_type = 'system.Dataset'


class Validation(Artifact):
    """The validate step's output: ``validation.json`` and ``data_report.html``.

    Example:
        >>> import estflow.dsl as ef
        >>> ef.Input[ef.Validation]
        Input[Validation]
    """

    builtin = 'validation'
    kfp_type = 'system.Artifact'


class Transformed(Artifact):
    """The transform step's output: the tf.Transform graph and the transformed splits.

    Example:
        >>> import estflow.dsl as ef
        >>> ef.Input[ef.Transformed]
        Input[Transformed]
    """

    builtin = 'transformed'
    kfp_type = 'system.Dataset'


class TrainedModel(Artifact):
    """The train step's output (the artifact ``model``): ``checkpoints/`` and ``export/``, the
    serving SavedModel.

    Example:
        >>> import estflow.dsl as ef
        >>> ef.Input[ef.TrainedModel]
        Input[TrainedModel]
    """

    builtin = 'model'
    kfp_type = 'system.Model'


class Evaluation(Artifact):
    """The evaluate step's output: ``metrics.json``, ``blessing.json`` and ``report.html``.

    Example:
        >>> import estflow.dsl as ef
        >>> ef.Input[ef.Evaluation]
        Input[Evaluation]
    """

    builtin = 'evaluation'
    kfp_type = 'system.Artifact'


class Pushed(Artifact):
    """The push step's output: ``push.json`` (the version pushed, or why none was).

    Example:
        >>> import estflow.dsl as ef
        >>> ef.Input[ef.Pushed]
        Input[Pushed]
    """

    builtin = 'pushed'
    kfp_type = 'system.Artifact'


class Predictions(Artifact):
    """The batch prediction step's output: the prediction files and ``predict.json``.

    Example:
        >>> import estflow.dsl as ef
        >>> ef.Input[ef.Predictions]
        Input[Predictions]
    """

    builtin = 'predictions'
    kfp_type = 'system.Dataset'


class Dataset(Artifact):
    """Rows a user step writes or reads (any files: CSV, Parquet, a database file).

    Example:
        >>> import estflow.dsl as ef
        >>> ef.Output[ef.Dataset]
        Output[Dataset]
    """

    builtin = None
    kfp_type = 'system.Dataset'


class ModelDir(Artifact):
    """A model a user step writes or reads (a directory of any files).

    Example:
        >>> import estflow.dsl as ef
        >>> ef.Output[ef.ModelDir]
        Output[ModelDir]
    """

    builtin = None
    kfp_type = 'system.Model'


class Metrics(Artifact):
    """Metrics a user step writes (a ``metrics.json`` of names and numbers, say).

    Example:
        >>> import estflow.dsl as ef
        >>> ef.Output[ef.Metrics]
        Output[Metrics]
    """

    builtin = None
    kfp_type = 'system.Metrics'


class HTML(Artifact):
    """An HTML page a user step writes (a report).

    Example:
        >>> import estflow.dsl as ef
        >>> ef.Output[ef.HTML]
        Output[HTML]
    """

    builtin = None
    kfp_type = 'system.HTML'


class Markdown(Artifact):
    """A Markdown page a user step writes.

    Example:
        >>> import estflow.dsl as ef
        >>> ef.Output[ef.Markdown]
        Output[Markdown]
    """

    builtin = None
    kfp_type = 'system.Markdown'


ArtifactKind = type[Artifact]
"""An artifact kind: :class:`Artifact` or one of its subclasses."""

BUILTIN_ARTIFACTS: dict[str, ArtifactKind] = {
    k.builtin: k for k in (Examples, Validation, Transformed, TrainedModel, Evaluation, Pushed,
                           Predictions)}
"""estflow's own artifacts by name -> their kind."""
ARTIFACT_KINDS: dict[str, ArtifactKind] = {
    k.__name__: k for k in (*BUILTIN_ARTIFACTS.values(), Dataset, ModelDir, Metrics, HTML,
                            Markdown, Artifact)}
"""Every kind by name (how a declaration stores it)."""

RESULT_FILE = "result.json"
"""The file a user step's result is written to, in its result artifact."""


def result_artifact(step_name: str) -> str:
    """The artifact holding user step ``step_name``'s result (:data:`RESULT_FILE`)."""
    return f"{step_name}_result"


@dataclasses.dataclass(frozen=True)
class _Marker:
    direction: str  # "input" | "output"
    kind: ArtifactKind

    def __repr__(self) -> str:
        return f"{self.direction.capitalize()}[{self.kind.__name__}]"


def _is_kind(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, Artifact)


class Input:
    """``Input[Kind]``: the annotation of a parameter that is an artifact the step reads (the
    function gets its directory, a :class:`pathlib.Path`). The parameter's name is the
    artifact's name: one of estflow's own or another step's output.

    Example:
        >>> import estflow.dsl as ef
        >>> @ef.step
        ... def count_rows(examples: ef.Input[ef.Examples]) -> dict:
        ...     return {"files": len(list((examples / "train").iterdir()))}
        >>> count_rows.declaration().inputs
        (Port(name='examples', type='Examples'),)
    """

    def __class_getitem__(cls, kind: ArtifactKind) -> _Marker:
        if not _is_kind(kind):
            raise DslError("Input[...]", f"an artifact kind, one of {sorted(ARTIFACT_KINDS)}",
                           kind)
        return _Marker("input", kind)


class Output:
    """``Output[Kind]``: the annotation of a parameter that is an artifact the step writes (the
    function gets an empty directory to fill). The parameter's name is the artifact's name,
    which later steps read it by.

    Example:
        >>> import estflow.dsl as ef
        >>> @ef.step
        ... def write_report(evaluation: ef.Input[ef.Evaluation], report: ef.Output[ef.HTML]):
        ...     (report / "index.html").write_text("<h1>ok</h1>")
        >>> write_report.declaration().outputs
        (Port(name='report', type='HTML'),)
    """

    def __class_getitem__(cls, kind: ArtifactKind) -> _Marker:
        if not _is_kind(kind):
            raise DslError("Output[...]", f"an artifact kind, one of {sorted(ARTIFACT_KINDS)}",
                           kind)
        return _Marker("output", kind)


@serializable
@dataclasses.dataclass(frozen=True)
class Port:
    """An artifact a user step reads or writes: its name and its kind's name (``type``)."""

    name: str
    type: str

    def __post_init__(self) -> None:
        _check_identifier(self.name, "name")
        if self.type not in ARTIFACT_KINDS:
            raise DslError("type", f"an artifact kind, one of {sorted(ARTIFACT_KINDS)}",
                           self.type)


OPERATORS = ("==", "!=", ">", ">=", "<", "<=")
"""The comparisons a :class:`When` may make."""


@serializable
@dataclasses.dataclass(frozen=True)
class When:
    """Run a step only when ``<step's value key> <op> value`` holds (build one with
    :func:`blessed` or :func:`result`).

    Args:
        step: ``"evaluate"`` (its value ``blessed``: whether the evaluation blessed the
            model) or a user step.
        key: the name of the value: ``blessed``, or a name of the user step's result (declared
            by its ``NamedTuple`` return annotation).
        op: one of ``==``, ``!=``, ``>``, ``>=``, ``<``, ``<=``.
        value: what the value is compared with.

    Example:
        >>> import estflow.dsl as ef
        >>> gate = ef.result("business_check")["auc"] >= 0.7
        >>> gate
        When(step='business_check', key='auc', op='>=', value=0.7)
        >>> gate.holds(0.75), gate.holds(0.5)
        (True, False)
    """

    step: str
    key: str
    op: str = "=="
    value: bool | int | float | str = True

    def __post_init__(self) -> None:
        if not isinstance(self.step, str) or not self.step:
            raise DslError("step", "a step name", self.step)
        if not isinstance(self.key, str) or not self.key:
            raise DslError("key", "a name of the step's result", self.key)
        if self.op not in OPERATORS:
            raise DslError("op", f"one of {list(OPERATORS)}", self.op)
        if not isinstance(self.value, (bool, int, float, str)) or (
                isinstance(self.value, float) and not math.isfinite(self.value)):
            raise DslError("value", "a bool, a finite number or a string", self.value)

    def holds(self, found: Any) -> bool:
        """Whether the condition holds for the upstream value ``found``."""
        ops: dict[str, Callable[[Any, Any], bool]] = {
            "==": lambda a, b: a == b, "!=": lambda a, b: a != b, ">": lambda a, b: a > b,
            ">=": lambda a, b: a >= b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b}
        try:
            return bool(ops[self.op](found, self.value))
        except TypeError:
            return False

    def __str__(self) -> str:
        return f"{self.step}.{self.key} {self.op} {self.value!r}"


def blessed() -> When:
    """The condition "the evaluate step blessed the model" (a :class:`When`).

    Example:
        >>> import estflow.dsl as ef
        >>> ef.blessed()
        When(step='evaluate', key='blessed', op='==', value=True)
    """
    return When("evaluate", "blessed", "==", True)


class _ResultValue:
    def __init__(self, step: str, key: str) -> None:
        self.step, self.key = step, key

    def _when(self, op: str, value: Any) -> When:
        return When(self.step, self.key, op, value)

    def __eq__(self, value):  # type: ignore[override]
        return self._when("==", value)

    def __ne__(self, value):  # type: ignore[override]
        return self._when("!=", value)

    def __gt__(self, value):
        return self._when(">", value)

    def __ge__(self, value):
        return self._when(">=", value)

    def __lt__(self, value):
        return self._when("<", value)

    def __le__(self, value):
        return self._when("<=", value)

    __hash__ = None  # type: ignore[assignment]


class _Result:
    def __init__(self, step: str) -> None:
        self.step = step

    def __getitem__(self, key: str) -> _ResultValue:
        return _ResultValue(self.step, key)


def result(step_name: str | StepFunction | UserStep) -> _Result:
    """A user step's result, to compare in a ``when``: ``ef.result("check")["auc"] > 0.7`` is
    the :class:`When` "step check's result ``auc`` is above 0.7".

    Args:
        step_name: the user step (its name, or the step itself).

    Example:
        >>> import estflow.dsl as ef
        >>> ef.result("check")["rows"] != 0
        When(step='check', key='rows', op='!=', value=0)
    """
    name = step_name if isinstance(step_name, str) else step_name.name
    return _Result(name)


_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
_JSON_SCALARS = (str, int, float, bool, type(None))


def _check_identifier(value: Any, path: str) -> None:
    if not isinstance(value, str) or not _NAME.match(value) or keyword.iskeyword(value):
        raise DslError(path, "a lower-case identifier (letters, digits, _)", value)


def _json_value(value: Any, path: str) -> Any:
    """``value`` if it is a JSON value (lists for tuples); else a DslError naming ``path``."""
    if isinstance(value, float) and not math.isfinite(value):
        raise DslError(path, "a JSON value (a finite number)", value)
    if isinstance(value, _JSON_SCALARS):
        return value
    if isinstance(value, (list, tuple)):
        return [_json_value(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise DslError(f"{path}.{key!r}", "a JSON object key (a string)", key)
            out[key] = _json_value(item, f"{path}.{key}")
        return out
    raise DslError(path, "a JSON value (str, int, float, bool, None, or lists and dicts of "
                   "them)", f"{type(value).__name__} {value!r}")


@serializable
@dataclasses.dataclass(frozen=True)
class UserStep:
    """A user step as the pipeline declares it (what :func:`step` makes; travels in the spec).

    Args:
        name: the step's name (a lower-case identifier, unique in the pipeline).
        fn: the function (its reference; the step's process imports it).
        inputs: the artifacts it reads (:class:`Port`: name and kind).
        outputs: the artifacts it writes.
        parameters: its arguments, a JSON object as text.
        returns: the names of its result (from a ``NamedTuple`` return annotation; empty:
            undeclared).
        when: run only when this holds (:class:`When`); None: always.
        after: steps it runs after, besides those writing its inputs.
        resources: its Kubeflow task's resources (:class:`~estflow.dsl.Resources`); its
            ``retries`` also retry it in a local run.
        image: the image its Kubeflow task runs (None: the pipeline's).
        packages: pip requirements installed in its Kubeflow task before it runs.
        cache: whether a run may reuse its earlier outputs (False: it runs every time, and so
            does every step reading its outputs).
        over: a mapped step's items (:meth:`StepFunction.map`): a JSON list, as text, of one
            object per item holding the parameters that vary (the others are
            ``parameters``); the step runs once per item and its outputs are collected.
            ``""``: not mapped.

    Example:
        >>> import estflow.dsl as ef
        >>> @ef.step(retries=1)
        ... def export(predictions: ef.Input[ef.Predictions], table: str = "scores") -> dict:
        ...     return {"rows": 0}
        >>> declared = export(table="daily")
        >>> declared.name, declared.parameters, declared.retries
        ('export', '{"table": "daily"}', 1)
    """

    name: str
    fn: CallableRef
    inputs: tuple[Port, ...] = ()
    outputs: tuple[Port, ...] = ()
    parameters: str = "{}"
    returns: tuple[str, ...] = ()
    when: When | None = None
    after: tuple[str, ...] = ()
    resources: Resources | None = None
    image: str | None = None
    packages: tuple[str, ...] = ()
    cache: bool = True
    over: str = ""

    def __post_init__(self) -> None:
        _check_identifier(self.name, "name")
        if not isinstance(self.fn, CallableRef):
            object.__setattr__(self, "fn", as_ref(self.fn, "fn"))
        for field in ("inputs", "outputs"):
            ports = tuple(getattr(self, field))
            for i, port in enumerate(ports):
                if not isinstance(port, Port):
                    raise DslError(f"{field}[{i}]", "a Port", port)
            object.__setattr__(self, field, ports)
        try:
            args = json.loads(self.parameters)
        except (TypeError, ValueError):
            raise DslError("parameters", "a JSON object (text)", self.parameters) from None
        if not isinstance(args, dict):
            raise DslError("parameters", "a JSON object (text)", self.parameters)
        for field in ("returns", "after", "packages"):
            value = getattr(self, field)
            if isinstance(value, str) or not isinstance(value, (tuple, list)) or not all(
                    isinstance(v, str) and v for v in value):
                raise DslError(field, "a tuple of non-empty strings", value)
            object.__setattr__(self, field, tuple(value))
        if self.when is not None and not isinstance(self.when, When):
            raise DslError("when", "a When (ef.blessed(), ef.result('step')['name'] > x)",
                           self.when)
        if self.resources is not None and not isinstance(self.resources, Resources):
            raise DslError("resources", "a Resources declaration", self.resources)
        if self.image is not None and (not isinstance(self.image, str) or not self.image):
            raise DslError("image", "an image reference (str)", self.image)
        if not isinstance(self.cache, bool):
            raise DslError("cache", "True or False", self.cache)
        if self.over not in ("", "[]"):
            try:
                items = json.loads(self.over)
            except (TypeError, ValueError):
                raise DslError("over", "a JSON list of objects (text)", self.over) from None
            if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
                raise DslError("over", "a JSON list of objects (text)", self.over)
            if self.when is not None:
                raise DslError("when", "no when on a mapped step (its items run or not "
                               "together; put the when on the step reading its outputs)",
                               str(self.when))

    def arguments(self) -> dict[str, Any]:
        """The step's parameters (JSON values) by name (a mapped step's: those common to its
        items; :meth:`item_arguments` gives one item's)."""
        return json.loads(self.parameters)

    @property
    def items(self) -> list[dict[str, Any]]:
        """A mapped step's items: the parameters varying per item (empty: not mapped)."""
        return json.loads(self.over) if self.over else []

    @property
    def mapped(self) -> bool:
        """Whether the step is mapped over items (:meth:`StepFunction.map`)."""
        return bool(self.items)

    def item_arguments(self, index: int) -> dict[str, Any]:
        """Item ``index``'s parameters: the common ones and the item's own."""
        return {**self.arguments(), **self.items[index]}

    @property
    def retries(self) -> int:
        """Times a failed run of the step is run again (its resources' ``retries``)."""
        return self.resources.retries if self.resources is not None else 0

    @property
    def result_artifact(self) -> str:
        """The artifact its result is written to (its first output on every runner)."""
        return result_artifact(self.name)


class StepFunction:
    """What :func:`step` returns: the function, declared as a step. Call it with the step's
    parameters to declare it in a pipeline (``steps=(write_scores(table="daily"),)``); put
    it there uncalled to take every default. ``python_func`` is the function itself."""

    def __init__(self, fn: Callable, *, name: str | None, when: When | None,
                 after: Sequence[str | StepFunction | UserStep], resources: Resources | None,
                 retries: int | None, image: str | None, packages: Sequence[str],
                 cache: bool) -> None:
        functools.update_wrapper(self, fn)
        self.python_func = fn
        ref = as_ref(fn, "step")
        self.name = name if name is not None else fn.__name__
        try:
            _check_identifier(self.name, "name")
        except DslError as err:
            raise DslError(f"step {fn.__name__!r}: name", err.expected, err.received) from None
        self._inputs, self._outputs, self._parameters, self._returns = _signature(fn)
        if retries is not None:
            if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
                raise DslError(f"step {self.name!r}: retries", "an int >= 0", retries)
            resources = dataclasses.replace(resources or Resources(), retries=retries)
        self._options = dict(
            fn=ref, when=when, resources=resources, image=image, cache=cache,
            after=tuple(a if isinstance(a, str) else a.name for a in after),
            packages=tuple(packages))

    def __call__(self, **arguments: Any) -> UserStep:
        """Declare the step with these parameters (the rest take their defaults)."""
        unknown = [k for k in arguments if k not in self._parameters]
        if unknown:
            names = list(self._parameters)
            hint = difflib.get_close_matches(unknown[0], names, n=1)
            artifact = " (an artifact is bound by its name, not given)" if unknown[0] in [
                p.name for p in self._inputs + self._outputs] else ""
            raise DslError(f"steps[{self.name!r}].{unknown[0]}",
                           f"a parameter of {self.name}(), one of {names}{artifact}",
                           arguments[unknown[0]],
                           note=f"did you mean {hint[0]!r}?" if hint else "")
        values = {}
        for key, default in self._parameters.items():
            if key in arguments:
                values[key] = _json_value(arguments[key], f"steps[{self.name!r}].{key}")
            elif default is inspect.Parameter.empty:
                raise DslError(f"steps[{self.name!r}].{key}", "a value (the parameter has no "
                               "default)", "nothing")
            else:
                values[key] = default
        return UserStep(name=self.name, inputs=self._inputs, outputs=self._outputs,
                        parameters=json.dumps(values, sort_keys=True), returns=self._returns,
                        **self._options)

    def map(self, **arguments: Any) -> UserStep:
        """Declare the step mapped over items: each argument given as a list varies per item
        (all such lists of one length, at least one item), the others are common to every
        item; the step runs once per item (``score.map(threshold=[0.3, 0.5], table="t")``
        runs ``score(threshold=0.3, table="t")`` and ``score(threshold=0.5, table="t")``).
        Each output ``out`` is *collected*: the steps after it read one artifact ``out`` holding
        ``0/``, ``1/``, ... (one item's directory each) and ``items.json`` (each item's
        parameters); its result is ``{"items": [result_0, result_1, ...]}``. A mapped step
        takes no ``when``, and no ``when`` reads its result.

        Example:
            >>> import estflow.dsl as ef
            >>> @ef.step
            ... def score(scores: ef.Output[ef.Dataset], threshold: float = 0.5,
            ...           table: str = "t") -> dict:
            ...     return {}
            >>> mapped = score.map(threshold=[0.3, 0.7], table="daily")
            >>> mapped.items, mapped.item_arguments(1)
            ([{'threshold': 0.3}, {'threshold': 0.7}], {'table': 'daily', 'threshold': 0.7})
        """
        lists = {k: v for k, v in arguments.items() if isinstance(v, (list, tuple))}
        if not lists:
            raise DslError(f"steps[{self.name!r}].map", "at least one parameter given as a "
                           "list of per-item values", arguments)
        lengths = {k: len(v) for k, v in lists.items()}
        first = next(iter(lists))
        for key, length in lengths.items():
            if length != lengths[first]:
                raise DslError(f"steps[{self.name!r}].{key}", f"a list of {lengths[first]} "
                               f"items, as {first!r} has (every mapped parameter has one "
                               f"value per item)", f"{length} items",
                               note=f"lengths: {lengths}")
        if lengths[first] == 0:
            raise DslError(f"steps[{self.name!r}].{first}", "at least one item", "[]")
        if self._options["when"] is not None:
            raise DslError(f"steps[{self.name!r}].when", "no when on a mapped step (its "
                           "items run or not together; put the when on the step reading its "
                           "outputs)", str(self._options["when"]))
        common = {k: v for k, v in arguments.items() if k not in lists}
        first_item = {k: v[0] for k, v in lists.items()}
        declared = self(**common, **first_item)  # checks names, defaults, JSON
        items = []
        for i in range(lengths[first]):
            item = {}
            for key, values in lists.items():
                item[key] = _json_value(values[i], f"steps[{self.name!r}].{key}[{i}]")
            items.append(item)
        kept = {k: v for k, v in declared.arguments().items() if k not in lists}
        return dataclasses.replace(declared, parameters=json.dumps(kept, sort_keys=True),
                                   over=json.dumps(items, sort_keys=True))

    def declaration(self) -> UserStep:
        """The step with every parameter at its default."""
        return self()

    def __repr__(self) -> str:
        return f"<estflow step {self.name!r} ({self._options['fn']})>"


def step(fn: Callable | None = None, *, name: str | None = None, when: When | None = None,
         after: Sequence[str | StepFunction | UserStep] = (),
         resources: Resources | None = None, retries: int | None = None,
         image: str | None = None, packages: Sequence[str] = (),
         cache: bool = True) -> Any:
    """Declare a function as a pipeline step: ``@ef.step`` or ``@ef.step(when=ef.blessed())``.

    Args:
        fn: the function (``@ef.step`` alone passes it; ``@ef.step(...)`` returns the
            decorator).
        name: the step's name (default: the function's).
        when: run only when this holds (:func:`blessed`, :func:`result`).
        after: steps (names or step functions) it runs after, besides its inputs' writers.
        resources: its Kubeflow task's resources.
        retries: times a failed run is retried (locally and on Kubeflow).
        image: the image of its Kubeflow task (default: the pipeline's).
        packages: pip requirements its Kubeflow task installs first.
        cache: False: never reused (a step that acts on the world every run).

    The function's parameters are checked now: each artifact annotated ``Input[Kind]`` or
    ``Output[Kind]``, each other parameter with a JSON default (or none: then a value must be
    given when the step is declared).

    Fan-out: ``fn.map(threshold=[0.3, 0.5, 0.7], table="daily")`` declares the step mapped over
    items, one per value of the parameters given as lists (all of one length): it runs once per
    item (``<name>_0``, ``<name>_1``, ...: at once locally, a ``dsl.ParallelFor`` on Kubeflow;
    each cached on its own), and the steps after it read each output ``out`` collected, one
    directory ``out/<i>/`` per item plus ``out/items.json`` (each item's parameters); its result
    is ``{"items": [...]}``, the items' results. A mapped step takes no ``when``.

    Example:
        >>> import estflow.dsl as ef
        >>> @ef.step(when=ef.blessed(), cache=False)
        ... def notify(pushed: ef.Input[ef.Pushed], url: str) -> None:
        ...     pass
        >>> notify(url="http://127.0.0.1:9/hook").when
        When(step='evaluate', key='blessed', op='==', value=True)
    """
    def decorate(function: Callable) -> StepFunction:
        if not callable(function) or not hasattr(function, "__code__"):
            raise DslError("step", "a function", function)
        return StepFunction(function, name=name, when=when, after=after,
                            resources=resources, retries=retries, image=image,
                            packages=packages, cache=cache)

    return decorate(fn) if fn is not None else decorate


_PARAMETER_TYPES = (str, int, float, bool, list, dict, type(None))


def _signature(fn: Callable) -> tuple[tuple[Port, ...], tuple[Port, ...], dict[str, Any],
                                       tuple[str, ...]]:
    where = fn.__name__
    try:
        signature = inspect.signature(fn, eval_str=True)
    except (NameError, SyntaxError, TypeError) as err:
        raise DslError(f"step {where!r}: annotations", "annotations that evaluate (Input[...], "
                       "Output[...], JSON types)", str(err)) from None
    inputs: list[Port] = []
    outputs: list[Port] = []
    parameters: dict[str, Any] = {}
    for pname, param in signature.parameters.items():
        path = f"step {where!r}: parameter {pname!r}"
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise DslError(path, "a named parameter (no *args, **kwargs or positional-only)",
                           str(param))
        annotation = param.annotation
        if isinstance(annotation, _Marker):
            if param.default is not param.empty:
                raise DslError(path, "no default for an artifact", param.default)
            try:
                port = Port(pname, annotation.kind.__name__)
            except DslError as err:
                raise DslError(path, err.expected, err.received) from None
            (inputs if annotation.direction == "input" else outputs).append(port)
            continue
        if annotation is not param.empty and not _json_annotation(annotation):
            raise DslError(path, "Input[Kind], Output[Kind] or a JSON type (str, int, float, "
                           "bool, list, dict, Optional of them)", annotation)
        if param.default is not param.empty:
            parameters[pname] = _json_value(param.default, f"{path} default")
        else:
            parameters[pname] = param.empty
    return tuple(inputs), tuple(outputs), parameters, _returns(signature.return_annotation,
                                                               where)


def _json_annotation(annotation: Any) -> bool:
    if annotation in _PARAMETER_TYPES or annotation is None or annotation is Any:
        return True
    origin = typing.get_origin(annotation)
    if origin in (list, dict, tuple):
        return True
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return all(_json_annotation(a) for a in typing.get_args(annotation))
    return False


def _returns(annotation: Any, where: str) -> tuple[str, ...]:
    """The names a ``NamedTuple`` return annotation declares (empty: none declared)."""
    fields = getattr(annotation, "_fields", None)
    if isinstance(annotation, type) and issubclass(annotation, tuple) and fields:
        for name in fields:
            try:
                _check_identifier(name, "name")
            except DslError:
                raise DslError(f"step {where!r}: return annotation", "NamedTuple fields that "
                               "are lower-case identifiers", name) from None
        return tuple(fields)
    return ()


def as_user_step(value: Any, path: str) -> UserStep:
    """A :class:`UserStep` from a declaration or a step function (taking its defaults)."""
    if isinstance(value, UserStep):
        return value
    if isinstance(value, StepFunction):
        try:
            return value.declaration()
        except DslError as err:
            raise DslError(path, f"{value.name}() called with its parameters ({err.expected} "
                           f"for {err.path})", "the step function uncalled") from None
    raise DslError(path, "a user step (a function decorated with @ef.step, called with its "
                   "parameters)", value)


def _hint(name: str, names: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(names), n=1)
    return f"did you mean {close[0]!r}?" if close else ""


def graph_errors(steps: Sequence[UserStep], builtin_steps: Sequence[str],
                 builtin_artifacts: Mapping[str, str],
                 builtin_results: Mapping[str, tuple[str, ...]]) -> list[DslError]:
    """Every error of the user steps' place in the DAG, all at once: two steps with one name,
    an input nobody writes, an input whose kind is not its writer's, an artifact written twice,
    an ``after`` or a ``when`` naming a step that is not there (or a result it does not
    declare), and a cycle. Paths are ``steps[i]...``; each names what was expected and what
    was received, with a "did you mean" where a near name exists.

    Args:
        steps: the pipeline's user steps, in declaration order.
        builtin_steps: the built-in steps this pipeline runs (by name).
        builtin_artifacts: the artifacts they write -> the writing step.
        builtin_results: built-in step -> the names of its result (evaluate: ``blessed``).
    """
    errors: list[DslError] = []
    names = list(builtin_steps)
    for i, s in enumerate(steps):
        if s.name in names:
            what = "built-in" if s.name in builtin_steps else "user"
            errors.append(DslError(f"steps[{i}].name", "a step name used once (name one with "
                                   "@ef.step(name=...))", s.name,
                                   note=f"a {what} step has this name"))
        names.append(s.name)
    writers: dict[str, tuple[str, str]] = {  # artifact -> (writing step, kind name)
        a: (w, BUILTIN_ARTIFACTS[a].__name__ if a in BUILTIN_ARTIFACTS else "Artifact")
        for a, w in builtin_artifacts.items()}
    for i, s in enumerate(steps):
        if any(x.name == s.name for x in steps[:i]):
            continue  # a second step of one name: named above (its outputs are the first's)
        for j, port in enumerate((Port(s.result_artifact, "Metrics"), *s.outputs)):
            path = f"steps[{i}].outputs[{j - 1}]" if j else f"steps[{i}].name"
            if port.name in writers:
                errors.append(DslError(path, "an artifact name no other step writes",
                                       port.name, note=f"step {writers[port.name][0]!r} "
                                       "writes it"))
                continue
            if port.name in BUILTIN_ARTIFACTS and port.type != port.name:
                errors.append(DslError(path, "a name that is not one of estflow's own "
                                       f"artifacts {sorted(BUILTIN_ARTIFACTS)}", port.name))
                continue
            writers[port.name] = (s.name, port.type)
    by_name = {s.name: s for s in steps}
    results_of = {s.result_artifact for s in steps}
    results = {**{k: tuple(v) for k, v in builtin_results.items()},
               **{s.name: s.returns for s in steps}}
    for i, s in enumerate(steps):
        for j, port in enumerate(s.inputs):
            path = f"steps[{i}].inputs[{j}]"
            if port.name not in writers:
                # (a step's result artifact may be read too, but is not offered)
                known = sorted(a for a in writers if a not in results_of)
                hint = _hint(port.name, known)
                unavailable = (" (estflow writes it only when the pipeline declares the step "
                               "that writes it: checks, push or predict)"
                               if port.name in BUILTIN_ARTIFACTS else "")
                errors.append(DslError(path, f"an artifact some step writes, one of {known}"
                                       f"{unavailable}", port.name, note=hint))
                continue
            writer, kind = writers[port.name]
            if writer == s.name:
                errors.append(DslError(path, "an artifact of another step", port.name,
                                       note="a step cannot read what it writes"))
            elif port.type not in ("Artifact", kind):
                errors.append(DslError(path, f"Input[{kind}] (step {writer!r} writes "
                                       f"{port.name!r} as {kind})", f"Input[{port.type}]"))
        for j, other in enumerate(s.after):
            if other not in names or other == s.name:
                errors.append(DslError(f"steps[{i}].after[{j}]", "the name of another step, "
                                       f"one of {[n for n in names if n != s.name]}", other,
                                       note=_hint(other, names)))
        if s.when is not None:
            w = s.when
            if w.step in by_name and by_name[w.step].mapped and w.step != s.name:
                errors.append(DslError(f"steps[{i}].when.step", "a step with a result that is "
                                       "not mapped (a mapped step's result is the list of "
                                       "its items' results)", w.step))
            elif w.step not in results or w.step == s.name:
                known = [n for n in results if n != s.name]
                errors.append(DslError(f"steps[{i}].when.step", "a step with a result, one "
                                       f"of {known}", w.step, note=_hint(w.step, known)))
            elif w.key not in results[w.step]:
                declared = list(results[w.step])
                note = _hint(w.key, declared) or (
                    f"declare what {w.step}() returns with a NamedTuple return annotation"
                    if not declared else "")
                errors.append(DslError(f"steps[{i}].when.key", "a name in the result of step "
                                       f"{w.step!r}, one of {declared}", w.key, note=note))
    taken = {*names, *writers}
    for i, s in enumerate(steps):
        if s.mapped:
            made = [n for j in range(len(s.items)) for n in (
                item_name(s.name, j), result_artifact(item_name(s.name, j)),
                *(item_name(p.name, j) for p in s.outputs))]
            clash = sorted(set(made) & taken)
            if clash:
                errors.append(DslError(f"steps[{i}]", "names no other step or artifact has "
                                       f"(mapped step {s.name!r} runs its items as steps "
                                       f"{s.name}_0, {s.name}_1, ... writing "
                                       "<artifact>_0, ...)", clash))
    errors += _cycles(steps, by_name, writers)
    return errors


def item_name(name: str, index: int) -> str:
    """The name of item ``index`` of mapped step (or of its output) ``name``: ``name_index``."""
    return f"{name}_{index}"


def upstream(s: UserStep, writers: Mapping[str, str]) -> list[str]:
    """The steps ``s`` runs after: its inputs' writers, its ``after`` and its ``when``'s step
    (``writers``: artifact -> writing step)."""
    found = [writers[p.name] for p in s.inputs if p.name in writers]
    found += list(s.after)
    if s.when is not None:
        found.append(s.when.step)
    return list(dict.fromkeys(found))


def _cycles(steps: Sequence[UserStep], by_name: Mapping[str, UserStep],
            writers: Mapping[str, tuple[str, str]]) -> list[DslError]:
    """A cycle among the user steps, as one error naming it (the built-in steps never read a
    user step's output, so a cycle is among user steps only)."""
    writer_of = {a: w for a, (w, _) in writers.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        stack.append(name)
        for up in upstream(by_name[name], writer_of):
            if up not in by_name:
                continue
            if state.get(up) == 1:
                return stack[stack.index(up):] + [up]
            if up not in state:
                found = visit(up)
                if found:
                    return found
        stack.pop()
        state[name] = 2
        return None

    for s in steps:
        if s.name not in state:
            cycle = visit(s.name)
            if cycle:
                index = next(i for i, x in enumerate(steps) if x.name == cycle[0])
                return [DslError(f"steps[{index}]", "steps whose inputs, after and when form "
                                 "no cycle", " -> ".join(reversed(cycle)))]
    return []


# What every step's spec keeps so that it is a valid pipeline: its name and schema (as the
# built-in steps' reads).
_SCHEMA = ("name", "features", "label", "columns", "derive.outputs")


def contract_row(s: UserStep, reads: Sequence[str] = ()) -> Step:
    """The contract row (:class:`estflow.dsl.contracts.Step`) of user step ``s``: the same row
    every built-in step is, so the planner, the local runner, the cache, the run records and the
    compiler take it as they take those. Its first output is its result artifact (the row's
    summary: the result is the step's metrics); ``reads``: the spec fields its key covers
    besides its own declaration (the plan adds its upstream user steps and the fields that make
    the built-in artifacts it reads exist)."""
    cpu = (s.resources.cpu_request if s.resources is not None else None) or "500m"
    memory = (s.resources.memory_request if s.resources is not None else None) or "1Gi"
    if s.mapped:
        return _collect_row(s, reads)
    return Step(
        s.name, USER_STEP_MODULE, tuple(p.name for p in s.inputs),
        (s.result_artifact, *(p.name for p in s.outputs)), f"{s.fn} (a user step)",
        options=(Option("step", "the user step to run (its declaration in the spec)",
                        required=True),),
        reads=(*_SCHEMA, f"steps.{s.name}", *reads), side_effects=not s.cache,
        caching=s.cache, requests=(cpu, memory), summary=RESULT_FILE, after=s.after,
        when=s.when, retries=s.retries)


ITEMS_FILE = "items.json"
"""The file of a mapped step's collected output listing each item's parameters."""


def item_row(s: UserStep, index: int, reads: Sequence[str] = ()) -> Step:
    """The contract row of item ``index`` of mapped step ``s``: step ``<name>_<index>``
    running ``python -m estflow.components.user_step --step <name> --item <index>``, writing
    its result to ``<name>_<index>_result`` and each output ``out`` to ``out_<index>``. Its key
    covers ``steps.<name>[<index>]``: the step with that item only (see
    :func:`estflow.dsl.fingerprints.project`), so editing another item does not rerun it."""
    row = dataclasses.replace(s, over="")
    name = item_name(s.name, index)
    cpu = (s.resources.cpu_request if s.resources is not None else None) or "500m"
    memory = (s.resources.memory_request if s.resources is not None else None) or "1Gi"
    return Step(
        name, USER_STEP_MODULE, tuple(p.name for p in row.inputs),
        (result_artifact(name), *(item_name(p.name, index) for p in s.outputs)),
        f"{s.fn} (a user step, item {index})",
        options=(Option("step", "the user step to run (its declaration in the spec)",
                        default=s.name, required=True),
                 Option("item", "the item of the mapped step to run", type="int",
                        default=index, required=True)),
        reads=(*_SCHEMA, f"steps.{s.name}[{index}]", *reads), side_effects=not s.cache,
        caching=s.cache, requests=(cpu, memory), summary=RESULT_FILE, after=s.after,
        retries=s.retries)


def _collect_row(s: UserStep, reads: Sequence[str]) -> Step:
    """The row collecting mapped step ``s``'s items: step ``<name>`` (what the steps after it
    wait for), reading every item's artifacts, writing ``<name>_result`` (``{"items": [...]}``)
    and each output ``out`` (``0/``, ``1/``, ... and :data:`ITEMS_FILE`)."""
    count = len(s.items)
    inputs = tuple(n for i in range(count) for n in (
        result_artifact(item_name(s.name, i)), *(item_name(p.name, i) for p in s.outputs)))
    return Step(
        s.name, USER_STEP_MODULE, inputs, (s.result_artifact, *(p.name for p in s.outputs)),
        f"{s.fn} (a user step: collects its {count} items)",
        options=(Option("step", "the user step to run (its declaration in the spec)",
                        default=s.name, required=True),),
        reads=(*_SCHEMA, f"steps.{s.name}", *reads), side_effects=not s.cache,
        caching=s.cache, requests=("100m", "256Mi"))

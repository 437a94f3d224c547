"""Hyperparameter search declarations: ``Pipeline.tune`` searches a space of model and
training settings for the values that give the best eval metric.

A search is a :class:`Tune`: a ``space`` mapping a path to a dimension (:class:`IntRange`,
:class:`FloatRange` or :class:`Choice`), an ``objective`` (a metric of the model's head on the
eval split, as :class:`~estflow.dsl.Candidates`' ``best_by``), a budget of ``trials`` and how
trials are drawn (``algorithm``) and stopped early (:class:`MedianStop` or
:class:`HalvingStop`).

A path addresses what the model or the train spec takes: ``"model.<field>"``, a field of
the premade model (e.g. ``model.hidden_units``, ``model.learning_rate``,
``model.dnn_optimizer``); ``"model.<field>[<column>].<field>"``, a field of the named element
of a column tuple (e.g. ``model.dnn_feature_columns[company].dimension`` for
``ef.Embedding("company", ...)``); ``"model.params.<key>"``, a key of a
:class:`~estflow.dsl.CustomModel`'s ``params`` (declared there: its declared value is what the
model_fn gets when the dimension is inactive); ``"train.<field>"``, a field of the
:class:`~estflow.dsl.TrainSpec` (e.g. ``train.batch_size``).

What defines the problem every trial is compared on is not searched: the model's
``n_classes``, ``label_dimension``, ``head``, ``label_vocabulary``, ``weight_column`` and
``model_fn``, and ``train.warm_start``.

A dimension with ``when=(path, value)`` is conditional: it is active only when the
:class:`Choice` at ``path`` takes ``value`` (e.g. a learning rate searched only for one
optimizer); an inactive dimension's path is absent from a trial's assignment, and the field
keeps its declared value.

``estflow.dsl.tune.apply(pipeline, assignment)`` turns an assignment ``{path: value}`` into the
pipeline a trial trains (also ``Tune.apply``).

Example:
    >>> import estflow.dsl as ef
    >>> tune = ef.Tune({"model.hidden_units": ef.Choice(((64, 32), (128, 64))),
    ...                 "model.learning_rate": ef.FloatRange(1e-4, 0.1, log=True)},
    ...                objective="auc", trials=10)
    >>> [path for path, _ in tune.dimensions()]
    ['model.hidden_units', 'model.learning_rate']
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import re
from collections.abc import Iterator
from collections.abc import Mapping
from typing import Any
from typing import Union

from estflow.dsl import _checks
from estflow.dsl import models as m
from estflow.dsl.errors import DslError
from estflow.dsl.errors import DslErrors
from estflow.dsl.serialization import serializable

__all__ = ["IntRange", "FloatRange", "Choice", "MedianStop", "HalvingStop", "EARLY_STOPPING",
           "Tune", "Dimension", "DIMENSIONS",
           "ALGORITHMS", "UNTUNED", "apply", "checked", "frozen", "same_choice", "as_json",
           "choice_as_text", "optuna_choices", "suggest"]

ALGORITHMS = ("tpe", "random", "grid")
"""How trials are drawn: ``"tpe"`` (a tree-structured Parzen estimator, learning from the
trials so far), ``"random"`` (independent draws) or ``"grid"`` (every combination of the
:class:`Choice` values and :class:`IntRange` steps, in a random order)."""

UNTUNED = {"model": ("n_classes", "label_dimension", "head", "label_vocabulary",
                     "weight_column", "model_fn"),
           "train": ("warm_start",)}
"""Fields no dimension may search: they define the problem every trial is compared on (the
same label, rows and metrics) or where training starts."""

_PATH = re.compile(r"^(model|train)\.([A-Za-z_]\w*)(?:\[([^\[\]]+)\]\.([A-Za-z_]\w*))?$")
_PARAMS = "model.params."
_PATH_FORMS = ("'model.<field>', 'model.<field>[<column>].<field>', 'model.params.<key>' or "
               "'train.<field>'")
_NAMING_FIELD = "feature"  # the field that names an element of a column tuple


# --- values ----------------------------------------------------------------------------------

def _frozen(value: Any) -> Any:
    """Lists become tuples (a JSON value back as the declaration holds it)."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    return value


def _key(value: Any) -> Any:
    """What compares two values as the same choice: ``1`` and ``1.0``, a list and a tuple of
    the same items; ``True`` and ``1`` are different."""
    if value is None or isinstance(value, (bool, str)):
        return (type(value).__name__, value)
    if isinstance(value, (int, float)):
        return ("number", float(value))
    if isinstance(value, (list, tuple)):
        return ("tuple", tuple(_key(v) for v in value))
    return ("other", repr(value))


def frozen(value: Any) -> Any:
    """A JSON value back as a declaration holds it (lists become tuples, recursively)."""
    return _frozen(value)


def same_choice(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same choice, as :meth:`Dimension.active` compares them
    (``1`` and ``1.0`` alike, a list and a tuple of the same items alike, ``True`` and ``1``
    not)."""
    return _key(a) == _key(b)


def _is_number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _is_choice_value(value: Any) -> bool:
    if value is None or isinstance(value, (bool, str)) or _is_number(value):
        return True
    return isinstance(value, (list, tuple)) and all(
        _is_number(v) or isinstance(v, str) for v in value)


_CHOICE_VALUE = ("a JSON value: a number, a string, True/False, None or a tuple of numbers "
                 "or strings, e.g. hidden units (64, 32)")


# --- dimensions ------------------------------------------------------------------------------

class Dimension:
    """What the dimensions (:class:`IntRange`, :class:`FloatRange`, :class:`Choice`) share:
    the condition ``when`` and the checks of a value."""

    when: tuple[str, Any] | None

    @property
    def parent(self) -> str | None:
        """The path this dimension depends on (``when[0]``; None: always active)."""
        return None if self.when is None else self.when[0]

    def active(self, assignment: Mapping[str, Any]) -> bool:
        """Whether this dimension takes a value in a trial that assigned ``assignment`` to the
        dimensions before it: always without ``when``, else when ``assignment[when[0]]`` is
        ``when[1]`` (a path absent from ``assignment`` takes no value)."""
        if self.when is None:
            return True
        path, value = self.when
        return path in assignment and _key(assignment[path]) == _key(value)

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is one this dimension can take."""
        raise NotImplementedError

    def describe(self) -> str:
        """The values this dimension takes, in words (for error messages)."""
        raise NotImplementedError

    def grid_values(self) -> tuple | range | None:
        """Every value, for ``algorithm="grid"`` (None: not enumerable)."""
        return None

    def _checked_values(self) -> tuple[tuple[str, Any], ...]:
        """(where, value) pairs the declaration applies to the field: the endpoints of a
        range, each value of a choice."""
        raise NotImplementedError

    def _check_when(self) -> None:
        if self.when is None:
            return
        when = self.when
        if (isinstance(when, (str, bytes)) or not isinstance(when, (list, tuple))
                or len(when) != 2 or not isinstance(when[0], str) or not when[0]):
            raise DslError("when", "None or (path, value): the Choice path and the value it "
                           "must take for this dimension to be searched, e.g. "
                           "('model.optimizer', 'Adam')", when)
        if not _is_choice_value(when[1]):
            raise DslError("when[1]", _CHOICE_VALUE, when[1])
        _checks.freeze(self, "when", (when[0], _frozen(when[1])))


@serializable
@dataclasses.dataclass(frozen=True)
class IntRange(Dimension):
    """Integers from ``low`` to ``high`` (both included), ``step`` apart, or on a log scale.

    Args:
        low: the smallest value.
        high: the largest value: ``low`` plus a multiple of ``step``, greater than ``low``.
        log: draw on a log scale (small values as likely as large ones, relatively); needs
            ``low >= 1`` and ``step=1``.
        step: the distance between two values (a grid takes every one).
        when: None, or ``(path, value)``: searched only when the :class:`Choice` at ``path``
            takes ``value``.

    Example:
        >>> import estflow.dsl as ef
        >>> batch_size = ef.IntRange(128, 512, step=128)
        >>> list(batch_size.grid_values())
        [128, 256, 384, 512]
    """

    low: int
    high: int
    log: bool = False
    step: int = 1
    when: tuple[str, Any] | None = None

    def __post_init__(self) -> None:
        for field in ("low", "high"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int):
                raise DslError(field, "an integer", value)
        if self.high <= self.low:
            raise DslError("high", f"an integer > low ({self.low})", self.high)
        if not isinstance(self.log, bool):
            raise DslError("log", "True or False", self.log)
        _checks.positive_int(self.step, "step")
        if self.log and self.step != 1:
            raise DslError("step", "1 with log=True (a log scale has no step)", self.step)
        if self.log and self.low < 1:
            raise DslError("low", "an integer >= 1 with log=True", self.low)
        if (self.high - self.low) % self.step:
            below = self.low + (self.high - self.low) // self.step * self.step
            raise DslError("high", f"low plus a multiple of step ({self.step}), e.g. {below}",
                           self.high)
        self._check_when()

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is an integer of the range (``low`` plus a multiple of ``step``)."""
        return (isinstance(value, int) and not isinstance(value, bool)
                and self.low <= value <= self.high and (value - self.low) % self.step == 0)

    def describe(self) -> str:
        """The range in words, e.g. ``an integer from 128 to 512 in steps of 128``."""
        step = f" in steps of {self.step}" if self.step != 1 else ""
        return f"an integer from {self.low} to {self.high}{step}"

    def grid_values(self) -> range | None:
        """Every value, ``low`` to ``high`` by ``step`` (None with ``log``: no grid)."""
        return None if self.log else range(self.low, self.high + 1, self.step)

    def _checked_values(self) -> tuple[tuple[str, Any], ...]:
        return ((".low", self.low), (".high", self.high))


@serializable
@dataclasses.dataclass(frozen=True)
class FloatRange(Dimension):
    """Numbers from ``low`` to ``high``, uniform or on a log scale (not in a grid).

    Args:
        low: the smallest value.
        high: the largest value, greater than ``low``.
        log: draw on a log scale (e.g. learning rates: 1e-4 to 1e-3 as likely as 1e-2 to
            1e-1); needs ``low > 0``.
        when: None, or ``(path, value)``: searched only when the :class:`Choice` at ``path``
            takes ``value``.

    Example:
        >>> import estflow.dsl as ef
        >>> rate = ef.FloatRange(1e-4, 0.1, log=True, when=("model.optimizer", "Adam"))
        >>> rate.active({"model.optimizer": "Adam"}), rate.active({"model.optimizer": "SGD"})
        (True, False)
    """

    low: float
    high: float
    log: bool = False
    when: tuple[str, Any] | None = None

    def __post_init__(self) -> None:
        for field in ("low", "high"):
            _checks.number(getattr(self, field), field)
            _checks.freeze(self, field, float(getattr(self, field)))
        if self.high <= self.low:
            raise DslError("high", f"a number > low ({self.low})", self.high)
        if not isinstance(self.log, bool):
            raise DslError("log", "True or False", self.log)
        if self.log and self.low <= 0:
            raise DslError("low", "a number > 0 with log=True", self.low)
        self._check_when()

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is a number from ``low`` to ``high``."""
        return _is_number(value) and self.low <= value <= self.high

    def describe(self) -> str:
        """The range in words, e.g. ``a number from 0.0001 to 0.1``."""
        return f"a number from {self.low} to {self.high}"

    def _checked_values(self) -> tuple[tuple[str, Any], ...]:
        return ((".low", self.low), (".high", self.high))


@serializable
@dataclasses.dataclass(frozen=True)
class Choice(Dimension):
    """One of several values.

    Args:
        values: the values, at least one, each different: numbers, strings, True/False, None
            or tuples of numbers or strings (e.g. hidden units ``(64, 32)``).
        when: None, or ``(path, value)``: searched only when the :class:`Choice` at ``path``
            takes ``value``.

    Example:
        >>> import estflow.dsl as ef
        >>> hidden_units = ef.Choice([[64, 32], [128, 64, 32]])
        >>> hidden_units.values
        ((64, 32), (128, 64, 32))
    """

    values: tuple[Any, ...]
    when: tuple[str, Any] | None = None

    def __post_init__(self) -> None:
        values = self.values
        if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
            raise DslError("values", "a tuple of values, e.g. ('Adagrad', 'Adam')", values)
        if not values:
            raise DslError("values", "at least one value", values)
        seen: dict[Any, int] = {}
        for i, value in enumerate(values):
            if not _is_choice_value(value):
                raise DslError(f"values[{i}]", _CHOICE_VALUE, value)
            if _key(value) in seen:
                raise DslError(f"values[{i}]", f"a value other than values[{seen[_key(value)]}]"
                               " (each value once)", value)
            seen[_key(value)] = i
        _checks.freeze(self, "values", _frozen(values))
        self._check_when()

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is one of ``values`` (a list as the tuple it stands for)."""
        return any(_key(value) == _key(v) for v in self.values)

    def describe(self) -> str:
        """The values in words, e.g. ``one of ['Adagrad', 'Adam']``."""
        return f"one of {list(self.values)}"

    def grid_values(self) -> tuple:
        """Every value: ``values``."""
        return self.values

    def _checked_values(self) -> tuple[tuple[str, Any], ...]:
        return tuple((f".values[{i}]", v) for i, v in enumerate(self.values))


DIMENSIONS = (IntRange, FloatRange, Choice)
AnyDimension = Union[IntRange, FloatRange, Choice]


@serializable
@dataclasses.dataclass(frozen=True)
class MedianStop:
    """Stop a trial early when it is behind: every ``every_steps`` training steps the trial's
    objective is evaluated, and a trial worse than the median of the earlier trials at the
    same step stops there (Optuna's MedianPruner: ``n_startup_trials=warmup_trials``,
    ``n_warmup_steps=warmup_steps``, ``interval_steps=every_steps``).

    Args:
        every_steps: training steps between two evaluations of a trial.
        warmup_steps: no trial stops before it has trained this many steps.
        warmup_trials: no trial stops until this many trials have finished.

    Example:
        >>> import estflow.dsl as ef
        >>> ef.MedianStop(every_steps=200, warmup_steps=400)
        MedianStop(every_steps=200, warmup_steps=400, warmup_trials=5)
    """

    every_steps: int
    warmup_steps: int = 0
    warmup_trials: int = 5

    def __post_init__(self) -> None:
        _checks.positive_int(self.every_steps, "every_steps")
        _checks.positive_int(self.warmup_steps, "warmup_steps", minimum=0)
        _checks.positive_int(self.warmup_trials, "warmup_trials", minimum=0)


@serializable
@dataclasses.dataclass(frozen=True)
class HalvingStop:
    """Stop all but the best trials early, by successive halving: every trial trains
    ``min_steps`` steps; then, at each rung (``min_steps``, ``min_steps * factor``,
    ``min_steps * factor**2``, ... steps), a trial goes on only if it is among the best
    ``1/factor`` of the trials that reached that rung, the stopped ones included (Optuna's
    SuccessiveHalvingPruner, the asynchronous successive halving of ASHA:
    ``min_resource=min_steps``, ``reduction_factor=factor``). With ``factor=2`` each rung is a
    median rule over every trial that reached it; unlike :class:`MedianStop` (which compares
    with the finished trials only) it stops about half of the trials at each rung, so it saves
    more of a search's time and trains fewer trials to the end. A trial is evaluated every
    ``min_steps`` steps (:attr:`every_steps`). Not on Katib, whose only early stopping is its
    median rule (:class:`MedianStop`): on Kubeflow, compile with ``--tune-on task``.

    Args:
        min_steps: steps every trial trains before it may be stopped (the first rung).
        factor: at each rung, the best ``1/factor`` of the trials go on (an integer >= 2);
            the next rung is ``factor`` times as many steps.

    Example:
        >>> import estflow.dsl as ef
        >>> stop = ef.HalvingStop(min_steps=500, factor=3)
        >>> stop
        HalvingStop(min_steps=500, factor=3)
        >>> stop.every_steps
        500
    """

    min_steps: int
    factor: int = 2

    def __post_init__(self) -> None:
        _checks.positive_int(self.min_steps, "min_steps")
        _checks.positive_int(self.factor, "factor", minimum=2)

    @property
    def every_steps(self) -> int:
        """Training steps between two evaluations of a trial: ``min_steps`` (every rung is a
        multiple of it)."""
        return self.min_steps


EARLY_STOPPING = (MedianStop, HalvingStop)
"""The early-stopping rules ``Tune.early_stopping`` takes."""


# --- the search ------------------------------------------------------------------------------

@serializable
@dataclasses.dataclass(frozen=True)
class Tune:
    """A hyperparameter search (``Pipeline.tune``): ``trials`` trainings of the pipeline's
    model, each with values drawn from ``space``, compared by ``objective`` on the eval split.

    Checked against the pipeline, every error at once: each path names a field of the model
    or train spec (with "did you mean" for a typo), the field takes each :class:`Choice` value
    and each range's endpoints (its own checks speak), the head produces ``objective``; tune
    is refused with :class:`~estflow.dsl.Candidates` (a search tunes one model) and with
    ``train.warm_start`` (every trial would start from the served model, whatever its
    hyperparameters). In the pipeline, ``higher_is_better`` is resolved (a bool).

    Args:
        space: path -> :class:`IntRange`, :class:`FloatRange` or :class:`Choice` (see
            :mod:`estflow.dsl.tune` for the paths); kept as (path, dimension) pairs sorted by
            path.
        objective: the metric compared, one of the head's
            :data:`~estflow.dsl.models.METRIC_NAMES` on the eval split (as ``Candidates``'
            ``best_by``).
        higher_is_better: None: smaller wins for the losses and errors
            (:data:`~estflow.dsl.models.LOWER_IS_BETTER`), larger for the rest.
        trials: how many trials to train (the budget).
        parallel: trials trained at once, at most ``trials``.
        algorithm: ``"tpe"``, ``"random"`` or ``"grid"`` (:data:`ALGORITHMS`); a grid takes
            only :class:`Choice` and :class:`IntRange` (without log) dimensions, and at most
            as many trials as it has points.
        early_stopping: None, :class:`MedianStop` (stop trials behind the median of the
            finished ones) or :class:`HalvingStop` (successive halving: only the best
            ``1/factor`` go on at each rung).
        max_failures: how many trials may fail: the search gives up at the next failure
            (0: at the first), here, on Katib and in a ``--tune-on parallel-for`` fan-out.
        timeout_s: no new trial starts once the search has run this many seconds (None: no
            limit).
        trial_steps: training steps of each trial (None: ``train.max_steps``); not with
            ``train.max_steps`` in the space.
        seed: the seed of the draws (the same seed, the same trials).

    Example:
        >>> import estflow.dsl as ef
        >>> tune = ef.Tune({
        ...     "model.dnn_optimizer": ef.Choice(("Adagrad", "Adam")),
        ...     "model.dnn_learning_rate": ef.FloatRange(
        ...         1e-4, 0.1, log=True, when=("model.dnn_optimizer", "Adam")),
        ...     "model.dnn_feature_columns[company].dimension": ef.IntRange(4, 16, step=4),
        ...     "train.batch_size": ef.Choice((128, 256, 512)),
        ... }, objective="auc", trials=40, parallel=4,
        ...    early_stopping=ef.MedianStop(every_steps=200))
        >>> for path, dimension in tune.dimensions():  # a conditional one after its Choice
        ...     print(path, type(dimension).__name__)
        model.dnn_feature_columns[company].dimension IntRange
        model.dnn_optimizer Choice
        model.dnn_learning_rate FloatRange
        train.batch_size Choice
    """

    space: tuple[tuple[str, AnyDimension], ...]
    objective: str
    higher_is_better: bool | None = None
    trials: int = 20
    parallel: int = 1
    algorithm: str = "tpe"
    early_stopping: MedianStop | HalvingStop | None = None
    max_failures: int = 3
    timeout_s: float | None = None
    trial_steps: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        _checks.freeze(self, "space", _space_pairs(self.space))
        if not isinstance(self.objective, str) or not self.objective:
            raise DslError("objective", "a metric name of the model's head, e.g. 'auc'",
                           self.objective)
        if self.higher_is_better is not None and not isinstance(self.higher_is_better, bool):
            raise DslError("higher_is_better", "True, False or None", self.higher_is_better)
        if isinstance(self.trials, bool) or not isinstance(self.trials, int) or self.trials < 1:
            raise DslError("trials", "a positive integer: the number of trials to train (a "
                           "budget of 0 trains nothing)", self.trials)
        if (isinstance(self.parallel, bool) or not isinstance(self.parallel, int)
                or not 1 <= self.parallel <= self.trials):
            raise DslError("parallel", f"an integer from 1 to trials ({self.trials}): the "
                           "trials trained at once", self.parallel)
        _checks.one_of(self.algorithm, ALGORITHMS, "algorithm")
        if self.early_stopping is not None and \
                not isinstance(self.early_stopping, EARLY_STOPPING):
            raise DslError("early_stopping", "None, a MedianStop or a HalvingStop",
                           self.early_stopping)
        _checks.positive_int(self.max_failures, "max_failures", minimum=0)
        _checks.number(self.timeout_s, "timeout_s", low=0, low_open=True, allow_none=True)
        _checks.positive_int(self.trial_steps, "trial_steps", allow_none=True)
        if self.trial_steps is not None and "train.max_steps" in dict(self.space):
            raise DslError("trial_steps", "None when the space searches train.max_steps (each "
                           "trial trains the steps it draws)", self.trial_steps)
        _checks.positive_int(self.seed, "seed", minimum=0)
        self._check_conditions()
        if self.algorithm == "grid":
            self._check_grid()

    def _check_conditions(self) -> None:
        space = dict(self.space)
        for path, dim in self.space:
            if dim.when is None:
                continue
            parent, value = dim.when
            at = f"space[{path!r}].when"
            if parent not in space:
                close = difflib.get_close_matches(parent, list(space), n=1)
                raise DslError(at, f"(path, value) with a path of the space, one of "
                               f"{list(space)}", dim.when,
                               note=f"did you mean {close[0]!r}?" if close else "")
            if not isinstance(space[parent], Choice):
                raise DslError(at, f"(path, value) with the path of a Choice ({parent!r} is "
                               f"an {type(space[parent]).__name__})", dim.when)
            if not space[parent].contains(value):
                raise DslError(at, f"(path, value) with a value of {parent!r}: "
                               f"{space[parent].describe()}", dim.when)
            seen = [path]
            while space[seen[-1]].when is not None:
                seen.append(space[seen[-1]].when[0])
                if seen[-1] == path:
                    raise DslError(at, "a condition on a dimension that does not depend on "
                                   "this one", dim.when, note=" -> ".join(seen))

    def _check_grid(self) -> None:
        for path, dim in self.space:
            if dim.grid_values() is None:
                raise DslError(f"space[{path!r}]", "a Choice or an IntRange without log with "
                               "algorithm='grid' (a grid enumerates the values)", dim)
        size = self.grid_size()
        if self.trials > size:
            raise DslError("trials", f"at most {size}, the number of points of the grid (or "
                           "algorithm 'tpe' or 'random')", self.trials)

    def dimensions(self) -> tuple[tuple[str, AnyDimension], ...]:
        """The (path, dimension) pairs, sorted by path, each conditional one after the
        :class:`Choice` it depends on (the order a trial draws them in)."""
        placed: list[tuple[str, AnyDimension]] = []
        done: set[str] = set()
        left = list(self.space)
        while left:
            ready = [(p, d) for p, d in left if d.parent is None or d.parent in done]
            if not ready:  # a cycle: refused by the declaration, kept in order here
                ready = left[:1]
            path, dim = ready[0]
            placed.append((path, dim))
            done.add(path)
            left.remove((path, dim))
        return tuple(placed)

    def dimension(self, path: str) -> AnyDimension:
        """The dimension at ``path`` (KeyError if the space has none)."""
        return dict(self.space)[path]

    def grid(self) -> Iterator[dict[str, Any]]:
        """Every assignment of a grid (``algorithm="grid"``): each combination of the
        dimensions' values, an inactive conditional dimension absent."""
        dims = self.dimensions()

        def walk(i: int, assignment: dict[str, Any]) -> Iterator[dict[str, Any]]:
            if i == len(dims):
                yield dict(assignment)
                return
            path, dim = dims[i]
            if not dim.active(assignment):
                yield from walk(i + 1, assignment)
                return
            for value in dim.grid_values():
                assignment[path] = value
                yield from walk(i + 1, assignment)
                del assignment[path]

        return walk(0, {})

    def grid_size(self) -> int:
        """The number of assignments :meth:`grid` yields."""
        dims = self.dimensions()
        parents = {d.parent for _, d in dims if d.parent is not None}

        def count(i: int, assignment: dict[str, Any]) -> int:
            if i == len(dims):
                return 1
            path, dim = dims[i]
            if not dim.active(assignment):
                return count(i + 1, assignment)
            if path not in parents:
                return len(dim.grid_values()) * count(i + 1, assignment)
            total = 0
            for value in dim.grid_values():
                assignment[path] = value
                total += count(i + 1, assignment)
                del assignment[path]
            return total

        return count(0, {})

    def apply(self, pipeline: Any, assignment: Mapping[str, Any]) -> Any:
        """``pipeline`` with a trial's ``assignment`` applied (see :func:`apply`), its paths and
        values checked against this search's space."""
        return _apply(pipeline, assignment, self)


def _space_pairs(space: Any) -> tuple[tuple[str, AnyDimension], ...]:
    example = "e.g. {'model.learning_rate': ef.FloatRange(1e-4, 0.1, log=True)}"
    if isinstance(space, Mapping):
        pairs = list(space.items())
    elif isinstance(space, (list, tuple)) and all(
            isinstance(p, (list, tuple)) and len(p) == 2 for p in space):
        pairs = [tuple(p) for p in space]
    else:
        raise DslError("space", f"a dict: path -> IntRange, FloatRange or Choice, {example}",
                       space)
    if not pairs:
        raise DslError("space", f"at least one dimension, {example}", space)
    paths = [p for p, _ in pairs]
    for path, dim in pairs:
        if not isinstance(path, str) or not (_PATH.match(path) or (
                path.startswith(_PARAMS) and len(path) > len(_PARAMS))):
            raise DslError(f"space[{path!r}]", f"a path {_PATH_FORMS}", path)
        if paths.count(path) > 1:
            raise DslError(f"space[{path!r}]", "a path given once", path)
        if not isinstance(dim, DIMENSIONS):
            raise DslError(f"space[{path!r}]", "an IntRange, FloatRange or Choice",
                           type(dim).__name__)
    for path in paths:
        for other in paths:
            if other != path and (other.startswith(path + "[") or other.startswith(path + ".")):
                raise DslError(f"space[{other!r}]", f"a path outside {path!r}, which the space "
                               "also searches whole", other)
    return tuple(sorted(pairs, key=lambda p: p[0]))


# --- paths -----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Target:
    """Where a path points: ``root.field``, or element ``element`` of that tuple field and its
    field ``sub``, or key ``key`` of the model's params."""

    path: str
    root: str
    field: str
    element: str | None = None
    sub: str | None = None
    key: str | None = None

    def get(self, pipeline: Any) -> Any:
        obj = getattr(pipeline, self.root)
        if self.key is not None:
            return obj.params[self.key]
        value = getattr(obj, self.field)
        if self.element is not None:
            return getattr(next(c for c in value if _element_name(c) == self.element),
                           self.sub)
        return value


def _element_name(column: Any) -> str | None:
    return column if isinstance(column, str) else getattr(column, _NAMING_FIELD, None)


def _fields(obj: Any) -> list[str]:
    return [f.name for f in dataclasses.fields(obj) if f.init]


def _valid_paths(pipeline: Any) -> list[str]:
    """Every path a space may name for ``pipeline``'s model and train spec."""
    model, paths = pipeline.model, []
    for field in _fields(model):
        if field in UNTUNED["model"]:
            continue
        if field == "params" and isinstance(model, m.CustomModel):
            paths += [_PARAMS + k for k in model.params]
            continue
        paths.append(f"model.{field}")
        value = getattr(model, field)
        if isinstance(value, tuple):
            for col in value:
                if dataclasses.is_dataclass(col) and _element_name(col) is not None:
                    paths += [f"model.{field}[{_element_name(col)}].{sub}" for sub in _fields(col)
                              if sub != _NAMING_FIELD]
    paths += [f"train.{f}" for f in _fields(pipeline.train) if f not in UNTUNED["train"]]
    return paths


def _shown(paths: list[str]) -> list[str]:
    """``paths`` as an error lists them: the elements of a column tuple as one
    ``model.<field>[<column>].<field>`` each."""
    out: list[str] = []
    for path in paths:
        match = _PATH.match(path)
        if match and match.group(3):
            path = f"{match.group(1)}.{match.group(2)}[<column>].{match.group(4)}"
        if path not in out:
            out.append(path)
    return out


def _target(pipeline: Any, path: str, at: str) -> _Target | DslError:
    """The target of ``path`` in ``pipeline``, or the error (at ``at``) saying why it has
    none."""
    valid = _valid_paths(pipeline)
    if path in valid:
        if path.startswith(_PARAMS) and isinstance(pipeline.model, m.CustomModel):
            return _Target(path, "model", "params", key=path[len(_PARAMS):])
        root, field, element, sub = _PATH.match(path).groups()
        return _Target(path, root, field, element, sub)
    match = _PATH.match(path) if isinstance(path, str) else None
    model_kind = type(pipeline.model).__name__
    if match and match.group(2) in UNTUNED[match.group(1)] and not match.group(3):
        return DslError(at, f"a field other than {match.group(1)}.{match.group(2)}, which "
                        "defines the problem every trial is compared on (the same label, rows "
                        "and metrics) or where training starts", path)
    close = difflib.get_close_matches(path, valid, n=1) if isinstance(path, str) else []
    shown = _shown(valid)
    if isinstance(path, str) and path.startswith(_PARAMS):
        expected = (f"a key of the CustomModel's params: one of {shown}" if
                    isinstance(pipeline.model, m.CustomModel) else
                    f"a field of {model_kind} (params are a CustomModel's): one of {shown}")
    else:
        expected = f"the path of a field of {model_kind} or TrainSpec, one of {shown}"
    return DslError(at, expected, path, note=f"did you mean {close[0]!r}?" if close else "")


# --- applying values -------------------------------------------------------------------------

class _Refused(Exception):
    """A value a field refused: the path blamed, the field path that refused it (``where``)
    and what it expected."""

    def __init__(self, refusals: list[tuple[str, str, str]]) -> None:
        self.refusals = refusals  # (tune path, where, expected)
        super().__init__(refusals)


def _blame(where: str, paths: list[str]) -> str:
    """The assigned path a field error at ``where`` comes from (the longest that leads to it;
    else the first)."""
    leading = [p for p in paths if where == p or where.startswith((p + ".", p + "["))
               or p.startswith((where + ".", where + "["))]
    field_of = {p: ".".join(_PATH.match(p).groups()[:2]) if _PATH.match(p) else "model.params"
                for p in paths}
    leading = leading or [p for p in paths if where == field_of[p]
                          or where.startswith((field_of[p] + ".", field_of[p] + "["))]
    return max(leading, key=len) if leading else paths[0]


def _parts(pipeline: Any, pairs: list[tuple[_Target, Any]]) -> tuple[Any, Any]:
    """``pipeline``'s model and train spec with each target set to its value, built (and so
    checked by their own checks) again; raises :class:`_Refused` naming each refused value's
    path."""
    model, train = pipeline.model, pipeline.train
    paths = [t.path for t, _ in pairs]
    model_fields: dict[str, Any] = {}
    train_fields: dict[str, Any] = {}
    params: dict[str, Any] = {}
    elements: dict[tuple[str, str], dict[str, Any]] = {}
    for target, value in pairs:
        if target.root == "train":
            train_fields[target.field] = value
        elif target.key is not None:
            params[target.key] = value
        elif target.element is not None:
            elements.setdefault((target.field, target.element), {})[target.sub] = value
        else:
            model_fields[target.field] = value
    for (field, name), subs in elements.items():
        prefix = f"model.{field}[{name}]"
        try:
            model_fields[field] = tuple(dataclasses.replace(c, **subs)
                                        if _element_name(c) == name else c
                                        for c in getattr(model, field))
        except (DslError, TypeError) as err:
            raise _refused(err, prefix, paths) from None
    if params:
        model_fields["params"] = {**model.params, **params}
    try:
        model = dataclasses.replace(model, **model_fields) if model_fields else model
    except (DslErrors, DslError, TypeError) as err:
        raise _refused(err, "model", paths) from None
    try:
        train = dataclasses.replace(train, **train_fields) if train_fields else train
    except (DslErrors, DslError, TypeError) as err:
        raise _refused(err, "train", paths) from None
    return model, train


def _built(pipeline: Any, pairs: list[tuple[_Target, Any]], *, tune: Any) -> Any:
    """``pipeline`` with each target set to its value and ``tune`` as its search, built (and
    so validated) again; raises :class:`_Refused` naming each refused value's path."""
    model, train = _parts(pipeline, pairs)
    try:
        return dataclasses.replace(pipeline, model=model, train=train, tune=tune)
    except (DslErrors, DslError, TypeError) as err:
        raise _refused(err, "", [t.path for t, _ in pairs]) from None


def _refused(err: Exception, prefix: str, paths: list[str]) -> _Refused:
    errors = err.errors if isinstance(err, DslErrors) else [err]
    refusals = []
    for e in errors:
        if isinstance(e, DslError):
            where = f"{prefix}.{e.path}" if prefix else e.path
            expected = e.expected + (f" ({e.note})" if e.note else "")
        else:
            where, expected = prefix or "model", f"a value the field takes ({e})"
        refusals.append((_blame(where, paths), where, expected))
    return _Refused(refusals)


def _refusal_error(at: str, where: str, expected: str, value: Any) -> DslError:
    return DslError(at, f"{expected} (what {where} takes)", value)


def apply(pipeline: Any, assignment: Mapping[str, Any]) -> Any:
    """``pipeline`` with the model and train spec a trial trains: each path of ``assignment``
    (``{path: value}``, see :mod:`estflow.dsl.tune`) set to its value (JSON lists back as
    tuples), validated again; ``tune`` is kept.

    With ``pipeline.tune`` declared, each path must be one of its space, each value one its
    dimension takes, and a conditional dimension's path present only when it is active (a
    path absent keeps the declared value). Without, any path the model and train spec have.

    Raises:
        DslError: at ``assignment['<path>']``: an unknown path or a value the field (or the
            dimension) refuses; :class:`~estflow.dsl.DslErrors` when several are.

    Example:
        >>> import estflow.dsl as ef
        >>> from estflow.dsl.tune import apply
        >>> pipeline = ef.Pipeline(
        ...     name="taxi", source=ef.CsvSource("trips.csv"),
        ...     features=(ef.Numeric("fare"), ef.CategoricalVocab("company")),
        ...     label=ef.Label("tipped"),
        ...     model=ef.DNNClassifier(hidden_units=(16,), feature_columns=(
        ...         "fare", ef.Embedding("company", dimension=4))),
        ...     train=ef.TrainSpec(max_steps=1000),
        ...     tune=ef.Tune({"model.hidden_units": ef.Choice(((16,), (64, 32))),
        ...                   "model.feature_columns[company].dimension": ef.IntRange(2, 16),
        ...                   "train.batch_size": ef.Choice((128, 256))}, objective="auc"))
        >>> trial = apply(pipeline, {"model.hidden_units": [64, 32], "train.batch_size": 128,
        ...                          "model.feature_columns[company].dimension": 8})
        >>> trial.model.hidden_units, trial.model.feature_columns[1], trial.train.batch_size
        ((64, 32), Embedding(feature='company', dimension=8, combiner='mean'), 128)
    """
    return _apply(pipeline, assignment, getattr(pipeline, "tune", None))


def _apply(pipeline: Any, assignment: Mapping[str, Any], tune: Tune | None) -> Any:
    if not isinstance(assignment, Mapping):
        raise DslError("assignment", "a dict: path -> value", assignment)
    if not getattr(pipeline, "trains", False) or isinstance(pipeline.model, m.Candidates):
        raise DslError("model", "a premade model or CustomModel: a trial trains one model",
                       type(pipeline.model).__name__)
    values = {path: _frozen(value) for path, value in assignment.items()}
    space = dict(tune.space) if tune is not None else None
    errors: list[DslError] = []
    pairs: list[tuple[_Target, Any]] = []
    targets: dict[str, _Target] = {}
    for path, value in values.items():
        at = f"assignment[{path!r}]"
        if space is not None and path not in space:
            close = difflib.get_close_matches(path, list(space), n=1) if isinstance(
                path, str) else []
            errors.append(DslError(at, f"a path of the tune space, one of {list(space)}", path,
                                   note=f"did you mean {close[0]!r}?" if close else ""))
            continue
        target = _target(pipeline, path, at)
        if isinstance(target, DslError):
            errors.append(target)
            continue
        targets[path] = target
        pairs.append((target, value))
    if space is not None and not errors:
        for target, value in pairs:
            dim, at = space[target.path], f"assignment[{target.path!r}]"
            parent = dim.parent
            if parent is not None and parent not in values:
                current = _target(pipeline, parent, at)
                seen = {parent: current.get(pipeline)} if isinstance(current, _Target) else {}
            else:
                seen = values
            if not dim.active(seen):
                errors.append(DslError(at, f"no value: the dimension is searched only when "
                                       f"{parent} is {dim.when[1]!r} (here "
                                       f"{seen.get(parent)!r})", value))
            elif not dim.contains(value):
                errors.append(DslError(at, dim.describe(), value))
    if not errors:
        try:
            return _built(pipeline, pairs, tune=pipeline.tune)
        except _Refused as refused:
            errors = [_refusal_error(f"assignment[{path!r}]", where, expected, values[path])
                      for path, where, expected in refused.refusals]
    raise errors[0] if len(errors) == 1 else DslErrors(errors)


# --- the pipeline's checks -------------------------------------------------------------------

def _objective(model: Any, tune: Tune) -> tuple[str, bool] | DslError:
    """The objective's name and direction by :class:`~estflow.dsl.Candidates`' rules for
    ``best_by`` (the same code: a search compares trials as Candidates compares models)."""
    try:
        rule = m.Candidates({"trial": model, "other": model}, best_by=tune.objective,
                            higher_is_better=tune.higher_is_better)
    except DslError as err:
        field = "objective" if err.path == "best_by" else err.path
        names = m.METRIC_NAMES[m.head_of(model)]
        close = difflib.get_close_matches(str(tune.objective), names, n=1)
        note = err.note or (f"did you mean {close[0]!r}?" if close else "")
        return DslError(f"tune.{field}", err.expected, err.received, note=note)
    return rule.best_by, rule.higher_is_better


def checked(pipeline: Any, *, others_valid: bool = True) -> tuple[Tune, list[DslError]]:
    """``pipeline.tune`` checked against the pipeline (its objective resolved) and every error
    found, with paths from the pipeline's root; ``others_valid``: the rest of the pipeline
    passed its checks (only then is each value applied to the whole pipeline, not only to the
    model and train spec). ``Pipeline`` calls it."""
    tune = pipeline.tune
    if isinstance(pipeline.model, m.Candidates):
        return tune, [DslError("tune", "None with Candidates: a search tunes the "
                               "hyperparameters of one model (declare that model as "
                               "Pipeline.model)", f"Tune over {[p for p, _ in tune.space]}")]
    errors: list[DslError] = []
    if pipeline.train.warm_start is not None:
        errors.append(DslError("train.warm_start", "None with tune (every trial would start "
                               "from the served version's checkpoint, trained with other "
                               "hyperparameters)", pipeline.train.warm_start))
    cluster = pipeline.run_config.cluster
    if cluster is not None and cluster.distributed:
        errors.append(DslError("run_config.cluster", "None or a one-process cluster with tune "
                               "(the trials and the final train run in one process each; a "
                               "multi-worker search is not supported)", cluster))
    objective = _objective(pipeline.model, tune)
    if isinstance(objective, DslError):
        errors.append(objective)
    base = dataclasses.replace(pipeline, tune=None) if others_valid else None
    for path, dim in tune.space:
        at = f"tune.space[{path!r}]"
        target = _target(pipeline, path, at)
        if isinstance(target, DslError):
            errors.append(target)
            continue
        for where, value in dim._checked_values():
            refusal = _value_refusal(pipeline, base, target, value)
            if refusal is not None:
                errors.append(_refusal_error(at + where, *refusal, value))
    if errors:
        return tune, errors
    best_by, higher = objective
    return dataclasses.replace(tune, objective=best_by, higher_is_better=higher), []


def _value_refusal(pipeline: Any, base: Any, target: _Target,
                   value: Any) -> tuple[str, str] | None:
    """(where, expected) when the field at ``target`` refuses ``value``: the model's or train
    spec's own checks, then (``base``: the pipeline without its search) the pipeline's."""
    try:
        if base is None:
            _parts(pipeline, [(target, value)])
        else:
            _built(base, [(target, value)], tune=None)
    except _Refused as refused:
        _, where, expected = refused.refusals[0]
        return where, expected
    return None


# --- the space as Optuna draws it ----------------------------------------------------------
# The local search (components/tune/space.py) and a compiled fan-out's draw
# (pipelines/kubeflow/tune_fan_out.py) both draw through these: one draw for one seed.

def as_json(value: Any) -> Any:
    """A declared value as JSON holds it (tuples as lists; a non-finite float as None)."""
    if isinstance(value, (list, tuple)):
        return [as_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def choice_as_text(dim: Choice) -> bool:
    """Whether ``dim``'s values go to Optuna as their JSON text: Optuna's categorical values
    are None, booleans, numbers and strings, so a Choice of strings only, or of numbers only,
    goes as it is, any other (tuples such as hidden units ``(64, 32)``, None or booleans among
    numbers) as the JSON text of each value (``"[64, 32]"``)."""
    values = dim.values
    if all(isinstance(v, str) for v in values):
        return False
    return not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def optuna_choices(dim: Choice) -> tuple:
    """``dim``'s values as Optuna's ``suggest_categorical`` takes them (:func:`choice_as_text`)."""
    return (tuple(json.dumps(as_json(v)) for v in dim.values) if choice_as_text(dim)
            else dim.values)


def suggest(trial: Any, tune: Tune) -> dict[str, Any]:
    """Draw an assignment for an Optuna ``trial`` (its ``suggest_int``, ``suggest_float`` and
    ``suggest_categorical``; Optuna itself is not imported here): each active dimension, in
    the order of :meth:`Tune.dimensions` (an enqueued trial's fixed values come back as they
    were given)."""
    assignment: dict[str, Any] = {}
    for path, dim in tune.dimensions():
        if not dim.active(assignment):
            continue
        if isinstance(dim, IntRange):
            assignment[path] = trial.suggest_int(path, dim.low, dim.high, step=dim.step,
                                                 log=dim.log)
        elif isinstance(dim, FloatRange):
            assignment[path] = trial.suggest_float(path, dim.low, dim.high, log=dim.log)
        else:
            choices = optuna_choices(dim)
            assignment[path] = dim.values[choices.index(
                trial.suggest_categorical(path, choices))]
    return assignment

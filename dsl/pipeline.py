"""``Pipeline``: the root declaration tying source, features, label, model and specs together."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from collections.abc import Sequence

from estflow.dsl import _checks
from estflow.dsl import models as m
from estflow.dsl import tune as _tune
from estflow.dsl.batch import BatchPredict
from estflow.dsl.checks import DataChecks
from estflow.dsl.contracts import BATCH_PREDICT
from estflow.dsl.contracts import PREDICT_ONLY
from estflow.dsl.contracts import STEPS
from estflow.dsl.contracts import Step
from estflow.dsl.errors import DslError
from estflow.dsl.errors import DslErrors
from estflow.dsl.features import CATEGORICAL_KINDS
from estflow.dsl.features import Column
from estflow.dsl.features import Crossed
from estflow.dsl.features import Feature
from estflow.dsl.features import Label
from estflow.dsl.features import Numeric
from estflow.dsl.resources import Resources
from estflow.dsl.resources import check_step_resources
from estflow.dsl.serialization import from_json
from estflow.dsl.serialization import serializable
from estflow.dsl.serialization import to_json
from estflow.dsl.sources import Source
from estflow.dsl.sources import expect_source
from estflow.dsl.specs import Derive
from estflow.dsl.specs import EvalSpec
from estflow.dsl.specs import PushTarget
from estflow.dsl.specs import RunConfig
from estflow.dsl.specs import Split
from estflow.dsl.specs import TrainSpec
from estflow.dsl.steps import UserStep
from estflow.dsl.steps import as_user_step
from estflow.dsl.steps import graph_errors
from estflow.dsl.tune import Tune

__all__ = ["Pipeline", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1
_FEATURE_TYPES = (Numeric,) + CATEGORICAL_KINDS


@serializable
@dataclasses.dataclass(frozen=True)
class Pipeline:
    """A whole ML pipeline, declared once; run locally (``estflow run``) or compiled for
    Kubeflow Pipelines (``estflow compile``).

    Args:
        name: pipeline name (also the KFP pipeline name).
        source: where the raw data is (CSV, TFRecord, Parquet or BigQuery).
        features: feature declarations (see :mod:`estflow.dsl.features`).
        label: the label column.
        model: a premade model or a :class:`~estflow.dsl.CustomModel`.
        train: :class:`TrainSpec`.
        eval: :class:`EvalSpec`.
        run_config: :class:`RunConfig`.
        push: where a trained, evaluated model is pushed (None: no push step).
        split: train/eval split.
        columns: raw columns read by no feature (e.g. used only by ``derive``).
        derive: a hook computing derived columns (e.g. the label) inside the transform graph.
        resources: step name -> :class:`Resources` (cpu/memory, accelerator, node pool,
            secrets, volumes, retries, timeout, caching) of that step's Kubeflow task; steps
            not named get the cluster's defaults. Local runs ignore it.
        predict: batch prediction (:class:`BatchPredict`): in a training pipeline a step
            after push, scoring with the model just pushed (it needs ``push``); alone (a
            pipeline declaring only ``name``, ``predict`` and perhaps ``resources``), scoring
            with the already served model that ``predict.model`` names.
        checks: the checks of each run's data (:class:`~estflow.dsl.checks.DataChecks`),
            run by the ``validate`` step after ingest; a blocking anomaly stops the run before
            training. None: no validate step.
        steps: the user steps (functions decorated with :func:`~estflow.dsl.step`, called with
            their parameters), placed in the DAG by the artifacts they read and write
            (:mod:`estflow.dsl.steps`).
        tune: a hyperparameter search (:class:`~estflow.dsl.Tune`) over the model's and the
            train spec's fields, checked against them (None: no search). In the pipeline its
            ``higher_is_better`` is resolved (a bool).
        schema_version: the spec format version; leave it at its default (a spec written by
            another estflow version is refused rather than misread).

    Checks across fields, all reported at once: feature names the model and crosses use,
    raw columns declared twice with different dtypes or defaults, the label against the
    model's head (a string label's vocabulary gives the number of classes, ``n_classes`` or a
    :class:`CustomModel`'s ``head`` must match it; a model ``label_vocabulary`` must be the
    string label's own vocabulary), and the eval thresholds against the metrics the head
    produces (:data:`~estflow.dsl.models.METRIC_NAMES`: a name tf.estimator also reports, such
    as ``auc`` or ``auc_precision_recall``, is tf.estimator's metric; ``loss`` is refused: the
    losses are ``average_loss``, the mean over the examples), and a ``tune`` search against
    the model and train spec (its paths, values and objective). Whether the
    raw columns are in the data is checked against the data itself (:meth:`header_errors`;
    ``estflow run``, ``preprocess`` and ``compile`` read a local CSV source's header before
    anything runs).

    Raises:
        DslError: a field has the wrong type or value (its path names it).
        DslErrors: listing every invalid cross-reference at once (unknown feature names,
            conflicting column declarations, a categorical used as a number, a label that
            does not fit the model's head, a threshold on a metric the head does not
            produce, ...).

    Example:
        >>> import estflow.dsl as ef
        >>> pipeline = ef.Pipeline(
        ...     name="taxi-tips",
        ...     source=ef.CsvSource("data/trips.csv"),
        ...     features=(ef.Numeric("fare", default=0.0, normalize="z_score"),
        ...               ef.CategoricalVocab("company", default="", top_k=50)),
        ...     label=ef.Label("tipped"),
        ...     model=ef.DNNClassifier(hidden_units=(32, 16), feature_columns=(
        ...         "fare", ef.Embedding("company", dimension=4))),
        ...     train=ef.TrainSpec(max_steps=1000),
        ...     eval=ef.EvalSpec(thresholds=(ef.Threshold("auc", lower_bound=0.6),)),
        ...     push=ef.PushTarget("serving_models", "taxi"),
        ...     resources={"train": ef.Resources(cpu_request="4", memory_request="8Gi")})
        >>> [c.name for c in pipeline.raw_columns()]
        ['fare', 'company', 'tipped']
        >>> ef.Pipeline.from_json(pipeline.to_json()) == pipeline
        True
    """

    name: str
    source: Source | None = None
    features: tuple[Feature, ...] = ()
    label: Label | None = None
    model: m.Model | None = None
    train: TrainSpec | None = None
    eval: EvalSpec = EvalSpec()
    run_config: RunConfig = RunConfig()
    push: PushTarget | None = None
    split: Split = Split()
    columns: tuple[Column, ...] = ()
    derive: Derive | None = None
    resources: Mapping[str, Resources] = dataclasses.field(default_factory=dict)
    predict: BatchPredict | None = None
    checks: DataChecks | None = None
    steps: tuple[UserStep, ...] = ()
    tune: Tune | None = None
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        _checks.pipeline_name(self.name)
        if self.predict is not None:
            _expect(self.predict, BatchPredict, "predict")
        _checks.freeze(self, "steps", tuple(as_user_step(s, f"steps[{i}]")
                                            for i, s in enumerate(_steps_tuple(self.steps))))
        if not self.trains:
            _check_prediction_only(self)
            step_errors = _step_errors(self)
            if step_errors:
                raise DslErrors(step_errors)
            return
        expect_source(self.source)
        _checks.freeze(self, "features", _checks.tuple_of(
            self.features, "features", _FEATURE_TYPES, min_len=1, what="feature declarations"))
        _expect(self.label, Label, "label")
        _expect(self.model, (*m.Model.__args__, m.Candidates), "model",
                "a premade model, a CustomModel or Candidates")
        _expect(self.train, TrainSpec, "train")
        _expect(self.eval, EvalSpec, "eval")
        _expect(self.run_config, RunConfig, "run_config")
        if self.push is not None:
            _expect(self.push, PushTarget, "push")
        _expect(self.split, Split, "split")
        _checks.freeze(self, "columns", _checks.tuple_of(self.columns, "columns", Column,
                                                         what="Column declarations"))
        if self.derive is not None:
            _expect(self.derive, Derive, "derive")
        if self.checks is not None:
            _expect(self.checks, DataChecks, "checks")
        if self.tune is not None:
            _expect(self.tune, Tune, "tune")
        _checks.freeze(self, "resources", check_step_resources(self.resources))
        if self.schema_version != SCHEMA_VERSION:
            raise DslError("schema_version", f"{SCHEMA_VERSION} (this estflow's spec version)",
                           self.schema_version)
        _checks.freeze(self, "eval", _estflow_metric_names(self.eval, m.head_of(self.model)))
        errors = _cross_check(self) + _step_errors(self)
        if self.tune is not None:  # each value is tried on the pipeline: once the rest holds
            tune, tune_errors = _tune.checked(self, others_valid=not errors)
            errors += tune_errors
            _checks.freeze(self, "tune", tune)
        if errors:
            raise DslErrors(errors)

    # Derived views, computed from the declaration (never stored).
    @property
    def trains(self) -> bool:
        """Whether the pipeline trains a model (False: it only predicts, see ``predict``)."""
        return self.predict is None or any(
            value is not None and value != () for value in
            (self.source, self.features, self.label, self.model, self.train))

    def raw_columns(self) -> tuple[Column, ...]:
        """Every raw input column (read by features, the label or ``columns``), in declaration
        order, with its dtype and default; derived columns are not raw (none without
        training)."""
        return _raw_columns(self)[0] if self.trains else ()

    def derived_names(self) -> tuple[str, ...]:
        """The names of the columns ``derive`` computes (empty without it)."""
        return tuple(c.name for c in self.derive.outputs) if self.derive else ()

    def header_errors(self, header: Sequence[str], file: str) -> list[DslError]:
        """What does not fit between the declared raw columns and the ``header`` of a CSV
        ``file`` ([] when all is well): every raw column must appear in it exactly once, and
        with ``schema_check.allow_unseen_columns=False`` nothing else may. Each error's path
        is the field that reads the column (``features[2].source``, ``label.name``, ...)."""
        return _header_errors(self, list(header), file)

    def feature(self, name: str) -> Feature:
        """The feature declared as ``name`` (KeyError if none is)."""
        for f in self.features:
            if f.name == name:
                return f
        raise KeyError(name)

    def to_json(self) -> str:
        """The spec as deterministic JSON (what ``estflow compile`` and every step read)."""
        return to_json(self)

    @staticmethod
    def from_json(text: str) -> Pipeline:
        """Read a spec written by :meth:`to_json` back (validated again)."""
        value = from_json(text)
        if not isinstance(value, Pipeline):
            raise DslError("spec", "a Pipeline spec", type(value).__name__)
        return value


def _expect(value, types, field: str, what: str | None = None) -> None:
    if not isinstance(value, types):
        names = what or (types.__name__ if isinstance(types, type) else
                         " or ".join(t.__name__ for t in types))
        raise DslError(field, f"a {names}", value)


def _raw_columns(p: Pipeline) -> tuple[tuple[Column, ...], list[DslError]]:
    derived = set(p.derived_names())
    seen: dict[str, tuple[Column, str]] = {}
    errors: list[DslError] = []
    declared = [(f"columns[{i}]", c) for i, c in enumerate(p.columns)]
    readers = [(f"features[{i}]", f) for i, f in enumerate(p.features) if hasattr(f, "column")]
    readers.append(("label", p.label))
    for path, decl in declared + readers:
        name = decl.name if isinstance(decl, Column) else decl.column
        if name in derived:
            continue
        col = Column(name, decl.dtype, decl.default)
        if name in seen and seen[name][0] != col:
            first, where = seen[name]
            errors.append(DslError(path, f"the same dtype and default as {where} for raw column "
                                   f"{name!r} ({first.dtype}, default={first.default!r})",
                                   f"{col.dtype}, default={col.default!r}"))
            continue
        seen.setdefault(name, (col, path))
    return tuple(c for c, _ in seen.values()), errors


def _column_fields(p: Pipeline) -> dict[str, str]:
    """Raw column name -> the path of the first field that reads it (derived columns are not
    raw)."""
    derived = set(p.derived_names())
    fields = [(f"columns[{i}].name", c.name) for i, c in enumerate(p.columns)]
    fields += [(f"features[{i}].{'source' if f.source else 'name'}", f.column)
               for i, f in enumerate(p.features) if hasattr(f, "column")]
    fields.append((f"label.{'source' if p.label.source else 'name'}", p.label.column))
    out: dict[str, str] = {}
    for path, name in fields:
        if name not in derived:
            out.setdefault(name, path)
    return out


_DELIMITERS = (",", ";", "\t", "|")
_SHOWN_COLUMNS = 40  # of a header, in an error message


def _header_errors(p: Pipeline, header: list[str], file: str) -> list[DslError]:
    if not header:
        return [DslError("source.path", "CSV files that start with a header row",
                         f"{file} is empty")]
    errors: list[DslError] = []
    derived = list(p.derived_names())
    delimiter = getattr(p.source, "delimiter", ",")
    note = ""
    if len(header) == 1:
        other = next((d for d in _DELIMITERS if d != delimiter and d in header[0]), None)
        if other:
            note = (f"the header has one column: source.delimiter is {delimiter!r}, but the "
                    f"header holds {other!r}")
    shown = ", ".join(header[:_SHOWN_COLUMNS])
    if len(header) > _SHOWN_COLUMNS:
        shown += f", ... ({len(header)} columns)"
    for name, path in _column_fields(p).items():
        count = header.count(name)
        if count == 1:
            continue
        if count > 1:
            errors.append(DslError(path, f"a column that appears once in the header of {file}",
                                   f"{name!r} appears {count} times"))
            continue
        expected = f"a column of {file} (header: {shown})"
        if derived:
            expected += f" or an output of derive ({', '.join(derived)})"
        close = difflib.get_close_matches(name, header + derived, n=1)
        hint = note or (f"did you mean {close[0]!r}?" if close else "")
        errors.append(DslError(path, expected, name, note=hint))
    check = getattr(p.source, "schema_check", None)
    if check is not None and not check.allow_unseen_columns:
        raw = _column_fields(p)
        unseen = [h for h in header if h not in raw]
        if unseen:
            errors.append(DslError("source.schema_check.allow_unseen_columns", f"True, or a "
                                   f"header of {file} holding only declared raw columns",
                                   unseen))
    return errors


def _estflow_metric_names(spec: EvalSpec, head: str) -> EvalSpec:
    """``spec`` with each threshold on a tf.estimator metric name renamed to estflow's."""
    aliases = m.METRIC_ALIASES[head]
    if not any(t.metric in aliases for t in spec.thresholds):
        return spec
    thresholds = tuple(dataclasses.replace(t, metric=aliases[t.metric])
                       if t.metric in aliases else t for t in spec.thresholds)
    return dataclasses.replace(spec, thresholds=thresholds)


def _check_thresholds(p: Pipeline) -> list[DslError]:
    head = m.head_of(p.model)
    names, aliases = m.METRIC_NAMES[head], m.METRIC_ALIASES[head]
    errors = []
    for i, threshold in enumerate(p.eval.thresholds):
        if threshold.metric == "loss":
            errors.append(DslError(
                f"eval.thresholds[{i}].metric", "'average_loss', the mean over the eval "
                "examples of each one's loss (what a threshold on 'loss' checked before: its "
                "bounds keep their meaning)", threshold.metric,
                note="tf.estimator's eval 'loss', which the train step's evaluations and "
                "TensorBoard show, is the mean of the eval batches' losses: it weighs a short "
                "last batch as much as a full one, depends on the eval batch size and is not "
                "what the evaluate step computes"))
        elif threshold.metric not in names and threshold.metric not in aliases:
            other = f" (or other names for them: {list(aliases)})" if aliases else ""
            errors.append(DslError(
                f"eval.thresholds[{i}].metric", f"one of the {head} head's metrics "
                f"{list(names)}{other}", threshold.metric,
                note="the evaluate step computes only these"))
    return errors


def _models(p: Pipeline) -> list[tuple[str, m.Model]]:
    """The models a pipeline trains, each with its path: ``model``, or each candidate's."""
    if isinstance(p.model, m.Candidates):
        return [(f"model.models[{name!r}]", model) for name, model in p.model.models.items()]
    return [("model", p.model)]


def _check_label(p: Pipeline, model: m.Model, path: str = "model") -> list[DslError]:
    """The label against the model's head: class names and their number."""
    label = p.label
    errors: list[DslError] = []
    model_vocab = tuple(getattr(model, "label_vocabulary", ()))
    if model_vocab and label.dtype != "string":
        errors.append(DslError(
            "label", f"Label({label.name!r}, dtype='string', vocabulary={model_vocab!r}): the "
            "model's label_vocabulary names the classes of a string label (ingest reads the "
            f"label as its dtype, so an {label.dtype} label holding class names would reject "
            "every row)", f"dtype={label.dtype!r}, vocabulary={label.vocabulary!r}"))
    elif model_vocab and model_vocab != label.vocabulary:
        errors.append(DslError(
            f"{path}.label_vocabulary", f"label.vocabulary {label.vocabulary!r} (the label's "
            "vocabulary gives each class its id; another order or other names would name the "
            "predicted classes wrongly), or ()", model_vocab))
    derived = p.derived_names()
    read = {f.column for f in p.features if hasattr(f, "column")} | {label.column}
    unread = [name for name in derived if name not in read]
    close = difflib.get_close_matches(label.column, unread, n=1, cutoff=0.8)
    if close:  # e.g. a typo: the label would be read as a raw column the data lacks
        field = "label.source" if label.source else "label.name"
        errors.append(DslError(
            field, f"a raw column or an output of derive; did you mean {close[0]!r}, which "
            "derive computes and nothing reads?", label.column))
    if label.dtype == "string":
        count = len(label.vocabulary)
        n_classes = getattr(model, "n_classes", None)
        if n_classes is not None and n_classes != count:
            errors.append(DslError(
                f"{path}.n_classes", f"{count} (the number of class names in label.vocabulary "
                f"{label.vocabulary!r})", n_classes))
        elif isinstance(model, m.CustomModel) and model.head == "binary" and count != 2:
            errors.append(DslError(
                f"{path}.head", f"'multi_class' for the {count} class names of label.vocabulary "
                "(a binary head has 2 classes)", model.head))
    return errors


def _cross_check(p: Pipeline) -> list[DslError]:
    errors = _raw_columns(p)[1]
    names = [f.name for f in p.features]
    for i, name in enumerate(names):
        if name in names[:i]:
            errors.append(DslError(f"features[{i}].name", "a feature name used once", name))
    by_name = {f.name: f for f in p.features}
    for i, f in enumerate(p.features):
        if isinstance(f, Crossed):
            for j, key in enumerate(f.keys):
                # A cross of crosses is allowed only when declared earlier: no cycles.
                earlier = {g.name for g in p.features[:i]}
                if not isinstance(by_name.get(key), CATEGORICAL_KINDS) or key not in earlier:
                    errors.append(DslError(f"features[{i}].keys[{j}]", "the name of a "
                                           "categorical or bucketized feature declared before "
                                           "this cross", key))
    outputs = names + [p.label.name]
    weight = getattr(p.model, "weight_column", None)
    for path, name in (("label.name", p.label.name), ("model.weight_column", weight)):
        if name is not None and outputs.count(name) > 1:
            errors.append(DslError(path, "a name different from every feature name (features, "
                                   "the label and the weight column are all model inputs)",
                                   name))
    raw = {c.name for c in p.raw_columns()}
    if p.split.key is not None and p.split.key not in raw:
        errors.append(DslError("split.key", f"a raw column, one of {sorted(raw)}", p.split.key))
    for i, name in enumerate(p.eval.slices):
        if name not in raw:
            errors.append(DslError(f"eval.slices[{i}]", f"a raw column, one of {sorted(raw)}",
                                   name))
    for path, model in _models(p):
        errors += _check_model_columns(p, by_name, model, path)
        errors += _check_label(p, model, path)
    if isinstance(p.model, m.Candidates) and p.train.warm_start is not None:
        errors.append(DslError("train.warm_start", "None with Candidates (each candidate "
                               "would start from the one served version, whatever its "
                               "architecture)", p.train.warm_start))
    errors += _check_thresholds(p)
    if p.push is None and p.train.warm_start is not None:
        errors.append(DslError("train.warm_start", "None in a pipeline without a push target "
                               "(it starts from the version served at Pipeline.push)",
                               p.train.warm_start))
    if p.push is None and "push" in p.resources:
        errors.append(DslError("resources['push']", "no push resources in a pipeline without "
                               "a push target", p.resources["push"]))
    errors += _check_predict(p)
    if p.checks is not None:
        errors += [DslError(path, f"a raw column, one of {sorted(raw)}", name)
                   for path, name in p.checks.columns() if name not in raw]
    return errors


_PREDICT_STEP = "batch_predict"  # contracts.BATCH_PREDICT's name (resources key)


def _check_predict(p: Pipeline) -> list[DslError]:
    """Batch prediction in a training pipeline: after push, with the pushed model."""
    if p.predict is None:
        if _PREDICT_STEP in p.resources:
            return [DslError(f"resources[{_PREDICT_STEP!r}]", "no batch_predict resources in "
                             "a pipeline without predict", p.resources[_PREDICT_STEP])]
        return []
    errors = []
    if p.push is None:
        errors.append(DslError("push", "a PushTarget: predict scores with the model the "
                               "pipeline pushes (or declare a pipeline that only predicts, "
                               "with predict.model)", None))
    if p.predict.model is not None:
        errors.append(DslError("predict.model", "None in a pipeline that trains: it scores "
                               "with the model its push step publishes (a pipeline that only "
                               "predicts names its model)", p.predict.model))
    return errors


_TRAINING_ONLY = ("push", "derive", "columns", "split", "eval", "run_config", "checks",
                  "tune")


def _steps_tuple(value) -> tuple:
    if isinstance(value, (list, tuple)):
        return tuple(value)
    raise DslError("steps", "a tuple of user steps (functions decorated with @ef.step)", value)


def builtin_steps(p: Pipeline) -> tuple[Step, ...]:
    """The built-in contract rows ``p`` runs, in order: those whose ``needs`` it declares (push
    with a push target, validate with checks, batch prediction with ``predict``); a pipeline
    that only predicts runs that one step."""
    if not p.trains:
        return (PREDICT_ONLY,)
    return tuple(s for s in (*STEPS, BATCH_PREDICT)
                 if s.needs is None or getattr(p, s.needs) is not None)


def _step_errors(p: Pipeline) -> list[DslError]:
    """The user steps' errors in the DAG the pipeline makes (:func:`graph_errors`)."""
    if not p.steps:
        return []
    rows = builtin_steps(p)
    return graph_errors(p.steps, [r.name for r in rows],
                        {a: r.name for r in rows for a in r.outputs},
                        {r.name: (r.result.key,) for r in rows if r.result is not None})


def _check_prediction_only(p: Pipeline) -> None:
    """A pipeline that only predicts declares ``predict`` (with its model), and maybe
    ``resources`` for its step; nothing that belongs to training."""
    errors = []
    if p.predict.model is None:
        errors.append(DslError("predict.model", "where the served model is (a pushed model "
                               "<base_path>/<model_name>[/<version>] or a SavedModel "
                               "directory) in a pipeline that only predicts; or declare "
                               "source, features, label, model and train to train one first",
                               None))
    defaults = {f.name: f.default for f in dataclasses.fields(Pipeline)
                if f.default is not dataclasses.MISSING}
    for field in _TRAINING_ONLY:
        if getattr(p, field) != defaults[field]:
            errors.append(DslError(field, f"left at its default ({defaults[field]!r}) in a "
                                   "pipeline that only predicts (it trains nothing)",
                                   getattr(p, field)))
    _checks.freeze(p, "resources", check_step_resources(p.resources))
    for step in p.resources:
        if step != _PREDICT_STEP:
            errors.append(DslError(f"resources[{step!r}]", f"resources of {_PREDICT_STEP!r} "
                                   "only, the one step of a pipeline that only predicts",
                                   p.resources[step]))
    if p.schema_version != SCHEMA_VERSION:
        errors.append(DslError("schema_version", f"{SCHEMA_VERSION} (this estflow's spec "
                               "version)", p.schema_version))
    if errors:
        raise DslErrors(errors)


def _check_model_columns(p: Pipeline, by_name: dict[str, Feature], model: m.Model,
                         at: str = "model") -> list[DslError]:
    errors: list[DslError] = []
    if isinstance(model, m.CustomModel):
        return errors
    dnn_fields = [f for f in ("feature_columns", "dnn_feature_columns") if hasattr(model, f)]
    if isinstance(model, (m.LinearClassifier, m.LinearRegressor)):
        dnn_fields = []
    for field in dnn_fields:
        for i, col in enumerate(getattr(model, field)):
            path = f"{at}.{field}[{i}]"
            name = col if isinstance(col, str) else col.feature
            feat = by_name.get(name)
            if feat is None:
                errors.append(DslError(path, f"a declared feature, one of {sorted(by_name)}",
                                       name))
            elif isinstance(col, str) and not isinstance(feat, Numeric):
                errors.append(DslError(path, "a numeric feature; wrap a categorical feature "
                                       f"in ef.Indicator({name!r}) or ef.Embedding({name!r}, "
                                       "dimension=...)", name))
            elif not isinstance(col, str) and isinstance(feat, Numeric):
                errors.append(DslError(path, "a categorical feature inside "
                                       f"{type(col).__name__}; use the numeric feature by name",
                                       name))
    linear_field = next((f for f in ("feature_columns", "linear_feature_columns")
                         if hasattr(model, f) and f not in dnn_fields), None)
    if linear_field:
        for i, name in enumerate(getattr(model, linear_field)):
            if name not in by_name:
                errors.append(DslError(f"{at}.{linear_field}[{i}]",
                                       f"a declared feature, one of {sorted(by_name)}", name))
    weight = getattr(model, "weight_column", None)
    if weight is not None and weight not in {c.name for c in p.raw_columns()}:
        errors.append(DslError(f"{at}.weight_column", "a declared raw column", weight))
    return errors

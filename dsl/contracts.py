"""The one table of steps and artifacts: where components and pipelines meet.

Every step is written here once: its name, the component module that runs it, the artifact
directories it reads and writes, and the options its entry point takes. The local runner and the
KFP compiler (``estflow.pipelines``) build each step's argv from a :class:`Step`; each component
(``estflow.components.<step>``) builds its argument parser from the same :class:`Step`, so the
two sides cannot disagree about a flag. Neither side imports the other; both import this module.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
from collections.abc import Sequence

__all__ = ["Option", "add_options", "Step", "Result", "UiOutput", "UI_KINDS", "STEPS", "INGEST",
           "VALIDATE", "TRANSFORM", "TUNE", "TRAIN", "EVALUATE", "PUSH", "PREPROCESS", "TFJOB", "SERVE_MODULE", "SERVE_OPTIONS",
           "BATCH_PREDICT", "PREDICT_ONLY", "DEFAULT_GZIP_LEVEL", "step_named",
           "steps_for", "Files", "USER_STEP_MODULE", "FINGERPRINT", "MODEL_FINGERPRINT", "RUN_REFERENCE",
           "SELECT", "CANDIDATE_STEPS", "CANDIDATE_FINGERPRINTS", "CANDIDATES_FILE", "candidate_artifact", "artifact_role",
           "for_candidate", "select_row", "TUNED", "TUNE_BEST", "TUNE_STUDY_ENV", "TUNE_STUDIES",
           "TUNE_TRIALS", "TUNE_STUDY_LOCK", "tuned_train"]


@dataclasses.dataclass(frozen=True)
class Option:
    """One ``--flag`` of a step's entry point besides ``--spec`` and its artifacts.

    ``type`` is ``"str"``, ``"int"``, ``"float"`` or ``"bool"`` (``--flag`` alone is true;
    ``--flag=true|false`` as ``tensorflow_model_server`` takes it); ``default`` None with
    ``required`` False means the option may be left out. ``choices`` bounds an int option (inclusive range).
    ``aliases`` are other names of the same flag (``estflow serve`` takes
    ``tensorflow_model_server``'s spellings too).
    """

    flag: str
    help: str
    type: str = "str"
    default: str | int | float | None = None
    required: bool = False
    choices: tuple[int, int] | None = None
    aliases: tuple[str, ...] = ()


def _bool(text: str) -> bool:
    """An argparse type: ``true``/``false`` (also 1/0, yes/no; any case)."""
    value = {"true": True, "1": True, "yes": True, "false": False, "0": False,
             "no": False}.get(text.strip().lower())
    if value is None:
        raise argparse.ArgumentTypeError(f"expected true or false, got {text} (a positional "
                                         "argument goes before this flag)")
    return value


_bool.__name__ = "bool"
_TYPES = {"str": str, "int": int, "float": float, "bool": _bool}


def _in_range(convert, low: int, high: int):
    """An argparse type: ``convert``, then checked to be in ``low..high`` (argparse's
    ``choices`` would list every allowed value in its error)."""
    def checked(text: str):
        value = convert(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected {low}..{high}, got {text}")
        return value

    checked.__name__ = convert.__name__  # argparse names the type in its error messages
    return checked


def add_options(parser: argparse.ArgumentParser, options: tuple[Option, ...]) -> None:
    """Add ``--<flag>`` arguments for ``options`` to ``parser``: the one place a contract
    option becomes a command-line argument (the steps' entry points and the CLI both call it).
    """
    for option in options:
        convert = _TYPES[option.type]
        extra: dict = {}
        if option.choices is not None:
            convert = _in_range(convert, *option.choices)
            extra["metavar"] = f"{{{option.choices[0]}..{option.choices[1]}}}"
        if option.type == "bool":
            extra.update(nargs="?", const=True, metavar="true|false")
        shown = "" if option.default is None else f" (default: {option.default})"
        parser.add_argument(f"--{option.flag}", *(f"--{a}" for a in option.aliases),
                            dest=option.flag.replace("-", "_"), type=convert,
                            default=option.default,
                            required=option.required, help=option.help + shown, **extra)


@dataclasses.dataclass(frozen=True)
class Result:
    """A true/false value a step returns: ``key`` of the JSON file ``file`` in its output
    ``artifact`` (evaluate's: ``blessed`` of ``evaluation/blessing.json``). A later step's
    :attr:`Step.runs_if` names the step to run only when it is true: on KFP the task returns it
    and the gated tasks run in a condition group named ``key``; a local run's gated step reads
    the file itself (push reads the blessing). ``file`` is a plain name (its stem names a
    variable of the generated KFP task)."""

    artifact: str
    file: str
    key: str


@dataclasses.dataclass(frozen=True)
class UiOutput:
    """An output of the step's KFP task for the KFP UI only, filled from ``file`` in its output
    ``artifact`` after the step succeeded (a local run has the file itself).

    ``kind``: ``"metrics"`` (``system.Metrics``: a JSON object of scalars), ``"classification"``
    (``system.ClassificationMetrics``: a JSON object with ``roc`` (``fpr``, ``tpr``,
    ``thresholds``) and/or ``confusion_matrix`` (``categories``, ``matrix``)) or ``"html"``
    (``system.HTML``: the file, copied). ``file`` is a plain name, as :attr:`Result.file`.
    """

    name: str
    kind: str
    artifact: str
    file: str


UI_KINDS = ("metrics", "classification", "html")
"""The kinds of :class:`UiOutput`."""


@dataclasses.dataclass(frozen=True)
class Step:
    """A step: its name, the component module that runs it, its input artifacts (by the
    producing step's output name), its outputs, its options, whether it runs a Beam job
    (Beam steps take Beam pipeline options: ``--beam-options`` and pass-through ``--x=y``),
    the parts of the spec it reads, whether it acts outside its artifacts, and how it runs as
    a KFP task. Everything that is the step's own is a field here: the planner, the KFP
    compiler and the local runner read it from the row, so a new step is a new row (and its
    component folder).

    ``reads`` names :class:`~estflow.dsl.Pipeline` fields: ``"model"`` (the whole field),
    ``"model.weight_column"`` (one attribute of it; the rest of the field is a neutral
    stand-in) or ``"resources.train"`` (one entry of a mapping). The step gets only these
    (:func:`estflow.dsl.fingerprints.project`), and its cache key covers exactly them, so a
    step can never read a part of the spec that its key does not cover. None: the whole spec.

    ``side_effects``: the step changes something outside its artifacts (push publishes a
    version), so it is never reused from a cache, nor is any step after it that reads its
    outputs.

    ``needs``: a Pipeline field that must be declared (not None) for a pipeline to run the
    step (push: ``"push"``, the push target; batch prediction: ``"predict"``). None: always.

    ``caching``: whether KFP may reuse the step's task from its cache by default (a step's
    ``Resources(caching=...)`` and the ``caching`` compile option override it); False for a
    step whose result is not a function of its inputs (it reads or changes the world now).
    A step with ``side_effects`` must say False.

    ``requests``: the (cpu, memory) requests of the step's KFP task when its Resources declare
    neither request nor limit (a pod without requests is BestEffort: first evicted), sized for
    the example pipelines in the estflow image; declare Resources for real data.

    ``runs_if``: the name of an earlier step with a :attr:`result`; this step runs only when
    that result is true (push and batch prediction: only when evaluate blessed the model).

    ``result``: the true/false value the step returns (:class:`Result`), or None.

    ``ui_outputs``: the step's KFP task's outputs for the KFP UI (:class:`UiOutput`).

    ``summary``: a JSON file the step writes into its first output: its scalars (and those of
    its ``metrics`` object) are the step's metrics in the run's record and history. None: no
    summary.

    ``outside_storage``: the step reads or writes storage outside the run's artifacts that the
    fingerprint step reads too (ingest's source, push's served versions), so the fingerprint
    task mounts this step's declared PVCs and secrets.

    ``roles``: (artifact, flag) for an artifact the entry point takes under another name (a
    candidate's ``model_linear`` is the train step's ``--model``); every other artifact is
    its own flag. ``of``: the row this one was made from (``train`` for ``train_linear``:
    its resources are ``Pipeline.resources["train"]``); None for a row of its own.

    ``waits_for``: steps that, when the pipeline has them, end before this one starts without
    feeding it (train waits for validate: the data checks gate training, and a train task
    that waits for a validate that failed on a blocking anomaly never starts).

    ``warm``: the step's imports take seconds (TensorFlow, Beam), so a local run may leave a
    process with them done for the next run; False for a step that imports next to nothing
    (push).

    ``skip_note``: what the step's message says when its :attr:`runs_if` result is false
    and it is skipped, besides why (push: ``"not pushed"``).
    """

    def flag(self, artifact: str) -> str:
        """The entry point's flag (without ``--``) for ``artifact``."""
        return dict(self.roles).get(artifact, artifact)

    name: str
    module: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    description: str
    options: tuple[Option, ...] = ()
    beam: bool = False
    reads: tuple[str, ...] | None = None
    side_effects: bool = False
    needs: str | None = None
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

    def __post_init__(self) -> None:
        problems = list(self._problems())
        if problems:
            raise ValueError(f"Received an invalid contract row for step {self.name!r}: "
                             + "; ".join(problems))

    def _problems(self):
        """What is wrong with the row, each as 'field: expected ..., received ...'."""
        if self.side_effects and self.caching:
            yield "caching: expected False for a step with side_effects, received True"
        if not (len(self.requests) == 2 and all(isinstance(r, str) and r
                                                for r in self.requests)):
            yield f"requests: expected (cpu, memory) strings, received {self.requests!r}"
        if self.summary is not None and not self.outputs:
            yield "summary: expected a step with an output, received outputs=()"
        for field, artifact in ([("result", self.result.artifact)] if self.result else []) + [
                (f"ui_outputs[{o.name!r}]", o.artifact) for o in self.ui_outputs]:
            if artifact not in self.outputs:
                yield (f"{field}: expected a file of one of its outputs {list(self.outputs)}, "
                       f"received artifact {artifact!r}")
        for output in self.ui_outputs:
            if output.kind not in UI_KINDS:
                yield (f"ui_outputs[{output.name!r}].kind: expected one of {list(UI_KINDS)}, "
                       f"received {output.kind!r}")


class Files:
    """File names inside artifact directories (the only place these strings are written)."""

    # ingest -> examples/
    TRAIN_EXAMPLES = "train"            # directory of TFRecord shards of raw tf.Examples
    EVAL_EXAMPLES = "eval"
    SHARD_PREFIX = "part"               # <split>/part-NNNNN-of-MMMMM.gz
    REJECTED = "rejected.jsonl"         # one JSON object per rejected row: file, line, row, reason
    INGEST_STATS = "ingest.json"
    STATISTICS = "statistics.pb"       # DatasetFeatureStatisticsList, one dataset per split
    # validate -> validation/
    VALIDATION = "validation.json"     # {"passed", "anomalies": [...], "warnings": [...]}
    DATA_REPORT = "data_report.html"   # the anomalies and the statistics side by side
    INFERRED_SCHEMA = "schema.pbtxt"   # the schema inferred when DataChecks.schema is None
    # transform -> transformed/
    TRANSFORM_FN = "transform_fn"       # tft output dir (transform_fn/ + transformed_metadata/)
    TRANSFORMED_TRAIN = "train"
    TRANSFORMED_EVAL = "eval"
    TRANSFORM_STATS = "transform.json"
    # train -> model/
    CHECKPOINTS = "checkpoints"         # model_dir: checkpoints + TensorBoard events
    EXPORT = "export"                   # the serving SavedModel
    TRAIN_RESULT = "train.json"
    # evaluate -> evaluation/
    METRICS = "metrics.json"           # {"head", "metrics": {...}, "slices": {...}}
    BLESSING = "blessing.json"         # {"blessed": bool, "reasons": [...], "baseline": ...}
    REPORT = "report.html"             # self-contained HTML report with inline SVG plots
    KFP_METRICS = "kfp_metrics.json"   # {metric: number}, for KFP Metrics.log_metric
    KFP_CLASSIFICATION = "kfp_classification.json"  # {"roc": ..., "confusion_matrix": ...}
    EVAL_OUTPUTS = "eval_outputs.npz"  # the model's output per eval row (pushed with it)
    WARMUP_EXAMPLES = "warmup_examples.tfrecord"  # a few eval rows, serving features only
    # push -> pushed/
    PUSH_RESULT = "push.json"          # {"pushed": bool, ...}; {"pushed": false, "reasons"}
    KSERVE_MANIFEST = "inferenceservice.yaml"  # when PushTarget.kserve_manifest
    # batch_predict -> predictions/ (or BatchPredict.output, where predict.json is written last)
    PREDICTIONS_PREFIX = "predictions"  # predictions-SSSSS-of-NNNNN.<jsonl|csv|parquet|...>
    PREDICT_RESULT = "predict.json"     # the summary; {"skipped": true, ...} when not pushed

    # fingerprint -> fingerprints/
    FINGERPRINTS = "fingerprints.json"  # {"steps": {step: {"key", "spec", ...}}, "source", ...}
    # a pushed version (<base>/<model_name>/<version>/): where it came from
    LINEAGE = "assets.extra/estflow_lineage.json"  # {"fingerprint", "run", ...}
    SERVED_EVAL_OUTPUTS = "assets.extra/estflow_eval_outputs.npz"  # its EVAL_OUTPUTS
    SERVED_STATISTICS = "assets.extra/estflow_statistics.pb"  # its training data's STATISTICS
    # TF Serving's warm-up requests (a TFRecord of PredictionLog), built from WARMUP_EXAMPLES
    SERVED_WARMUP = "assets.extra/tf_serving_warmup_requests"

    SPEC = "pipeline.json"              # the serialised Pipeline, written by the runner
    RUN_RECORD = "run.json"             # a local run's record (pipelines/local/runs.py)


DEFAULT_GZIP_LEVEL = 1
"""GZIP level of the TFRecords the Beam steps write (1: fastest; the files are written once and
read a few times, so speed wins over the ~10% a higher level saves)."""

_SOURCE_ROOT = Option("source-root", "directory (or module:pkg.mod) relative source paths "
                      "resolve to")
_BEAM_OPTIONS = (
    Option("gzip-level", "GZIP level of the written TFRecords: 1 fastest (default), 9 smallest",
           type="int", default=DEFAULT_GZIP_LEVEL, choices=(1, 9)),
    Option("num-shards", "shards per split (default 0: the runner decides)", type="int",
           default=0),
    Option("beam-options", "Beam pipeline options as one string (also accepted as extra "
           "arguments), e.g. \"--runner=DataflowRunner --project=P ...\""),
)



def _remote(*artifacts: str) -> tuple[Option, ...]:
    """Where a remote Beam runner's workers find a step's artifacts, and what they run."""
    uris = tuple(Option(f"{a}-uri", f"remote URI of the {a} artifact (KFP's artifact.uri: "
                        "gs://, s3://, minio://) that a non-local Beam runner's workers read "
                        "or write (default: the URI a KFP local path /gcs/, /s3/, /minio/ "
                        "stands for)") for a in artifacts)
    return (*uris, Option("sdk-image", "SDK container image of a non-local Beam runner's "
                          "workers (default: $ESTFLOW_IMAGE, set in estflow's images)"))


# What every step reads of the spec: the pipeline's name and its schema (raw columns, features,
# the label, the names of derived columns; only transform runs the derive function).
# Step.reads adds the rest, step by step.
_SCHEMA = ("name", "features", "label", "columns", "derive.outputs")
_TRAIN_READS = (*_SCHEMA, "model", "train", "run_config", "eval.batch_size", "eval.steps",
                "eval.name", "eval.start_delay_secs", "eval.throttle_secs", "resources.train",
                # the cells ingest read as missing: recorded with the export, so that batch
                # scoring reads rows as training did (not the source's path: a moved source
                # keeps the trained model)
                "source.na_values", "source.string_na_values", "source.column_na_values")

TUNED = "hyperparameters"
"""The tune step's output, which the final train reads (:func:`tuned_train`): ``best.json``'s
assignment is applied to the model and train spec (:func:`estflow.dsl.tune.apply`)."""
TUNE_BEST = "best.json"  # tune -> hyperparameters/: {"assignment", "objective", "value", "trial"}
TUNE_STUDY_ENV = "ESTFLOW_TUNE_STUDY_DIR"
"""The tune step's default ``--study-dir``: ``estflow run`` sets it beside its step cache, so a
rerun (or a larger budget) finds the finished trials of an earlier run's search."""
TUNE_STUDIES = ".tune-studies"
"""The folder beside the step cache (``<ESTFLOW_HOME>/.tune-studies``) where ``estflow run``
keeps its searches, one folder per study key (``estflow runs prune`` prunes it too)."""
TUNE_TRIALS = "trials.json"
"""tune -> hyperparameters/: every trial, and the key of the study they belong to (``study``)."""
TUNE_STUDY_LOCK = "search.lock"
"""The file in a study's folder a running search holds (``flock``)."""


# The push step's run-time inputs (the local runner and the KFP task fill them in).
MODEL_FINGERPRINT = "model-fingerprint"
RUN_REFERENCE = "run"
# The ingest step's: the source's digest when the run started (the fingerprint step's).
SOURCE_DIGEST = "source-digest"
# The select step's: each candidate's model fingerprint (:data:`SELECT`).
CANDIDATE_FINGERPRINTS = "candidate-fingerprints"

INGEST = Step("ingest", "estflow.components.ingest", (), ("examples",),
    "read CSV, validate rows, reject bad ones, split train/eval, write tf.Examples",
    options=(_SOURCE_ROOT, *_BEAM_OPTIONS, *_remote("examples"),
             Option(SOURCE_DIGEST, "the source's fingerprint digest when the run started "
                    "(the fingerprint step's): the step fails if the data it read no "
                    "longer has it (the source changed under the run)")), beam=True,
    reads=(*_SCHEMA, "source", "split"), requests=("1", "2Gi"),
    summary=Files.INGEST_STATS, outside_storage=True)
# Never reused: it reads the schema file and the served model's statistics, which no
# cache key covers, and it costs a fraction of a second.
VALIDATE = Step("validate", "estflow.components.validate", ("examples",), ("validation",),
    "check the data's statistics against the schema, and drift against the served "
    "model's training data; stop before training on a blocking anomaly",
    options=(_SOURCE_ROOT,), reads=(*_SCHEMA, "checks", "push.base_path",
                                    "push.model_name"),
    side_effects=True, needs="checks", caching=False, requests=("500m", "1Gi"),
    summary=Files.VALIDATION, outside_storage=True)
TRANSFORM = Step("transform", "estflow.components.transform", ("examples",), ("transformed",),
    "analyze + transform with Beam and tf.Transform",
    options=(*_BEAM_OPTIONS, *_remote("examples", "transformed")), beam=True,
    reads=(*_SCHEMA, "derive", "split", "model.weight_column"), requests=("1", "4Gi"),
    summary=Files.TRANSFORM_STATS)
# Only with Pipeline.tune: the trials train and evaluate through the train and evaluate
# steps' own entry points (one answer: a trial's objective is the evaluate step's metric);
# the final train reads the best assignment (tuned_train).
TUNE = Step("tune", "estflow.components.tune", ("examples", "transformed"), (TUNED,),
    "search Pipeline.tune's space: train and evaluate each trial (in parallel, early "
    "stopping the ones behind), keep the best assignment for the final train",
    options=(
        Option("study-dir", "where searches are kept, one folder per key (default: "
               "$ESTFLOW_TUNE_STUDY_DIR, which estflow run sets to its cache, else the "
               "output's study/): a rerun or a larger budget reuses the finished trials"),
        Option("study-key", "the search's key: what makes trials comparable (default: a "
               "digest of the inputs and the declaration without the budget)"),
        Option("keep-models", "keep each trial's model directory (trials.json's "
               "model_dir)", type="bool", default=False),
        Option("katib-experiment", "the Katib Experiment estflow compile built (JSON; "
               "--tune-on katib): the trials run as Katib trials, a pod each, not in "
               "this task, which names the Experiment for the run, fills in its "
               "namespace and the inputs' bucket URIs, creates it, follows it and writes "
               "its best trial (empty or absent: the search runs in this task)")),
    reads=(*_TRAIN_READS, "tune", "eval"), needs="tune", requests=("2", "4Gi"),
    summary=Files.METRICS)
TRAIN = Step("train", "estflow.components.train", ("transformed",), ("model",),
    "train the Estimator, checkpoint, export the serving SavedModel",
    reads=_TRAIN_READS, requests=("1", "4Gi"), summary=Files.TRAIN_RESULT,
    waits_for=("validate",))
EVALUATE = Step("evaluate", "estflow.components.evaluate", ("examples", "model"), ("evaluation",),
    "metrics on the eval split through the exported model",
    reads=(*_SCHEMA, "model", "eval", "push.base_path", "push.model_name"),
    requests=("1", "2Gi"), summary=Files.METRICS,
    result=Result("evaluation", Files.BLESSING, "blessed"),
    ui_outputs=(UiOutput("metrics", "metrics", "evaluation", Files.KFP_METRICS),
                UiOutput("classification", "classification", "evaluation",
                         Files.KFP_CLASSIFICATION),
                UiOutput("html_report", "html", "evaluation", Files.REPORT)))
PUSH = Step("push", "estflow.components.push", ("model", "evaluation"), ("pushed",),
    "copy the export to <base>/<model_name>/<version>/ atomically",
    options=(Option(MODEL_FINGERPRINT, "fingerprint of the model artifact (the train "
                    "step's cache key): a served version with the same one is not "
                    "pushed again, and a pushed version records it"),
             Option(RUN_REFERENCE, "the run that made the model (a local run directory "
                    "or a KFP run), recorded in the pushed version's lineage")),
    # checks: the drift thresholds recorded in the pushed version's lineage (batch
    # scoring with it checks skew with them)
    reads=(*_SCHEMA, "push", "checks"), side_effects=True, needs="push", caching=False,
    requests=("500m", "1Gi"), runs_if="evaluate", summary=Files.PUSH_RESULT,
    outside_storage=True, warm=False, skip_note="not pushed")

STEPS = (INGEST, VALIDATE, TRANSFORM, TUNE, TRAIN, EVALUATE, PUSH)
"""The built-in steps of a training pipeline, in order (:func:`steps_for`)."""

FINGERPRINT = Step(
    "fingerprint", "estflow.components.fingerprint", (), ("fingerprints",),
    "fingerprint the source data, the user code and the served model; key every step",
    options=(_SOURCE_ROOT,
             Option("plan", "the steps to key, as JSON "
                    "(estflow.dsl.fingerprints.StepKeyInput)", required=True),
             Option("span", "a source with spans whose runner chose none (Kubeflow): the "
                    "span to read, or a time in it (empty: the schedule time, else the "
                    "latest span present)", default=""),
             Option("schedule-time", "the run's schedule time (KFP's "
                    "pipeline_job_schedule_time_utc): the span it falls in", default="")),
    reads=None, caching=False, requests=("100m", "256Mi"))
"""The first task of every run: it reads the source's fingerprint (content hashes of local
files; generation/etag/size of ``gs://``/``s3://`` objects, nothing downloaded), the user code
the spec names and the served version's lineage, and writes ``fingerprints.json``: each step's
cache key and the part of the spec it gets (:mod:`estflow.dsl.fingerprints`)."""

PREPROCESS = Step(
    "preprocess", "estflow.components.preprocess", (), ("examples", "transformed"),
    "ingest + transform in one Beam job", options=(_SOURCE_ROOT, *_BEAM_OPTIONS), beam=True,
    reads=(*_SCHEMA, "derive", "source", "split", "model.weight_column"))
"""``estflow preprocess``: the ingest and transform steps fused into one Beam job."""

TFJOB = Step(
    "train", "estflow.components.tfjob", ("transformed",), ("model",),
    "train on a Kubeflow training job (TrainJob or TFJob): submit it, follow it, copy the "
    "model out",
    options=(
        Option("image", "image of the replicas (estflow's)", required=True),
        Option("namespace", "default: this pod's namespace"),
        Option("name", "job name (default: derived from the KFP run and task, so a retry "
               "finds the job an earlier attempt submitted)"),
        Option("poll-seconds", "seconds between status reads", type="float", default=10.0),
        Option("timeout-seconds", "give up after this long (default: never)", type="float"),
        Option("ttl-seconds", "keep a finished job (its pods and logs) this long", type="int",
               default=86400),
        Option("runtime", "the ClusterTrainingRuntime of a TrainJob",
               default="estflow-tensorflow"),
    ), reads=_TRAIN_READS, requests=("250m", "512Mi"), summary=Files.TRAIN_RESULT,
    waits_for=("validate",))
"""The train step of a pipeline declaring a multi-process cluster, on Kubeflow: it submits
the ``Cluster.job_kind`` the pipeline declares."""

USER_STEP_MODULE = "estflow.components.user_step"
"""The entry point of every user step (:mod:`estflow.dsl.steps`): it imports the step's function
from the spec and calls it (``--step NAME`` names the step)."""

SERVE_MODULE = "estflow.components.serve"
"""``estflow serve``: the TF-Serving-compatible REST server over pushed models."""

SERVE_OPTIONS = (
    Option("port", "TCP port of the REST API; 0 picks a free one (tensorflow_model_server's "
           "--port is its gRPC port: see --grpc-port)", type="int", default=8501,
           choices=(0, 65535), aliases=("rest_api_port",)),
    Option("model-config-file", "instead of BASE_PATH: TF Serving's ModelServerConfig text "
           "file (model_config_list: several models, base paths, model_version_policy, "
           "version_labels)", aliases=("model_config_file",)),
    Option("model-base-path", "instead of BASE_PATH: one model's directory of <version>/ "
           "directories, served as --model-name", aliases=("model_base_path",)),
    Option("model-name", "the name --model-base-path is served under", default="default",
           aliases=("model_name",)),
    Option("host", "address to bind; loopback by default (nothing authenticates requests)",
           default="127.0.0.1"),
    Option("poll-seconds", "seconds between looks for newly pushed versions; 0: never",
           type="float", default=2.0, aliases=("file_system_poll_wait_seconds",)),
    Option("max-body-bytes", "largest request body accepted (413 above it, refused unread)",
           type="int", default=10 * 1024 * 1024),
    Option("threads", "worker threads answering requests (a bounded pool; idle and slow "
           "connections hold none)", type="int", default=16, choices=(1, 1024),
           aliases=("rest_api_num_threads",)),
    Option("request-timeout-seconds", "time a client has to send a whole request (408 after "
           "it), and the server to send the answer", type="float", default=30.0),
    Option("rest-api-timeout-in-ms", "--request-timeout-seconds in milliseconds "
           "(tensorflow_model_server's name; overrides it when given)", type="int",
           aliases=("rest_api_timeout_in_ms",)),
    Option("idle-timeout-seconds", "an idle keep-alive connection is closed after this long",
           type="float", default=60.0),
    Option("max-connections", "open connections at most; more are answered 503", type="int",
           default=256, choices=(1, 65536)),
    Option("grpc-port", "also serve TF Serving's gRPC API (PredictionService, ModelService) "
           "on this port of --host (tensorflow_model_server's --port); 0 picks a free one "
           "(default: no gRPC)", type="int", choices=(0, 65535)),
    Option("monitoring-config-file", "TF Serving's MonitoringConfig text file "
           "(prometheus_config { enable: true, path: \"...\" }): where the Prometheus metrics "
           "page is, or enable: false for none (default: on, at "
           "/monitoring/prometheus/metrics)", aliases=("monitoring_config_file",)),
    Option("enable-batching", "merge concurrent requests to the same signature into one call "
           "of the model (TF Serving's server-side batching; tune it with "
           "--batching-parameters-file) (default: off)", type="bool",
           aliases=("enable_batching",)),
    Option("batching-parameters-file", "TF Serving's BatchingParameters text file "
           "(max_batch_size, batch_timeout_micros, num_batch_threads, max_enqueued_batches, "
           "allowed_batch_sizes) for --enable-batching", aliases=("batching_parameters_file",)),
)
"""The options of ``estflow serve`` (the CLI's help and the component's parser are built from
these); the component takes ``BASE_PATH`` first."""

_PREDICT_OPTIONS = (_SOURCE_ROOT, _BEAM_OPTIONS[-1], *_remote("predictions"))
BATCH_PREDICT = Step(
    "batch_predict", "estflow.components.predict", ("pushed",), ("predictions",),
    "score Pipeline.predict's source with the model just pushed (skipped when none was)",
    options=_PREDICT_OPTIONS, beam=True, side_effects=True, needs="predict", caching=False,
    requests=("1", "4Gi"), runs_if="evaluate")
"""Batch prediction in a training pipeline: after push, with the pushed model
(``Pipeline.predict``). Never reused from a cache: it writes outside its artifact
(``BatchPredict.output``), and its source's rows change behind the same path (nightly
scoring)."""

PREDICT_ONLY = Step(
    "batch_predict", "estflow.components.predict", (), ("predictions",),
    "score Pipeline.predict's source with the served model it names", options=_PREDICT_OPTIONS,
    beam=True, side_effects=True, caching=False, requests=("1", "4Gi"))
"""The one step of a pipeline that only predicts (and of ``estflow predict``): the same entry
point as :data:`BATCH_PREDICT`, with the model the spec names instead of a pushed one."""


CANDIDATE_STEPS = ("train", "evaluate")
"""The rows a pipeline with :class:`~estflow.dsl.models.Candidates` runs once per candidate
(:func:`for_candidate`), before :data:`SELECT` picks one."""
_PER_CANDIDATE = ("model", "evaluation")  # the artifacts each candidate has its own of

SELECT = Step(
    "select", "estflow.components.select", (), ("evaluation", "model"),
    "pick the best blessed candidate by Candidates.best_by: its model and evaluation, with "
    "every candidate compared in the report", reads=(*_SCHEMA, "model", "eval"),
    options=(Option(CANDIDATE_FINGERPRINTS, "JSON object: each candidate's trained model's "
                    "fingerprint (its train step's output), by candidate name: the picked one's "
                    "is recorded in candidates.json, and push records it as the pushed "
                    "model's (a rerun picking the same trained model pushes nothing)"),),
    requests=("500m", "1Gi"), summary=Files.METRICS,
    result=Result("evaluation", Files.BLESSING, "blessed"),
    ui_outputs=EVALUATE.ui_outputs)
"""Where candidates meet (:func:`select_row`): its inputs are each candidate's model and
evaluation (``model_<name>``, ``evaluation_<name>``); its outputs are the pipeline's ``model``
and ``evaluation``, what push and the user's steps read."""
CANDIDATES_FILE = "candidates.json"  # select -> evaluation/: every candidate's metrics, blessing


def candidate_artifact(artifact: str, candidate: str) -> str:
    """A candidate's own ``model`` or ``evaluation`` (``model_linear``); others are shared."""
    return f"{artifact}_{candidate}" if artifact in _PER_CANDIDATE else artifact


def artifact_role(artifact: str) -> str:
    """What ``artifact`` is: a candidate's own (``model_linear``) is its ``model``; any other
    is itself."""
    return next((a for a in _PER_CANDIDATE if artifact.startswith(a + "_")), artifact)


def for_candidate(row: Step, candidate: str) -> Step:
    """Contract row ``row`` (one of :data:`CANDIDATE_STEPS`) for one candidate: named
    ``<row>_<candidate>``, its model and evaluation the candidate's own (taken under the
    row's flags), reading the candidate's model (``model@<candidate>``: the spec it gets
    holds that model as ``model``, and its cache key covers that candidate only)."""
    rename = functools.partial(candidate_artifact, candidate=candidate)
    inputs, outputs = tuple(map(rename, row.inputs)), tuple(map(rename, row.outputs))
    return dataclasses.replace(
        row, name=f"{row.name}_{candidate}", inputs=inputs, outputs=outputs,
        roles=tuple((rename(a), a) for a in (*row.inputs, *row.outputs) if rename(a) != a),
        of=row.name,
        after=tuple(f"{a}_{candidate}" if a in CANDIDATE_STEPS else a for a in row.after),
        reads=tuple(f"model@{candidate}" if r == "model" else r for r in row.reads or ()),
        result=row.result and dataclasses.replace(row.result,
                                                  artifact=rename(row.result.artifact)),
        ui_outputs=tuple(dataclasses.replace(u, artifact=rename(u.artifact))
                         for u in row.ui_outputs))


def select_row(candidates: Sequence[str]) -> Step:
    """:data:`SELECT` reading ``candidates``' models and evaluations, after their evaluations."""
    return dataclasses.replace(
        SELECT, inputs=tuple(candidate_artifact(a, c) for c in candidates
                             for a in _PER_CANDIDATE),
        after=tuple(f"evaluate_{c}" for c in candidates))


def tuned_train(row: Step) -> Step:
    """The train row of a pipeline with ``Pipeline.tune``: it also reads the tune step's
    :data:`TUNED` output (the best assignment), after the tune step."""
    return dataclasses.replace(row, inputs=(*row.inputs, TUNED),
                               after=tuple(dict.fromkeys((*row.after, "tune"))))


def step_named(name: str) -> Step:
    """The pipeline step called ``name`` (one of :data:`STEPS`)."""
    for step in STEPS:
        if step.name == name:
            return step
    raise KeyError(f"no step {name!r}; the steps are {[s.name for s in STEPS]}")


def steps_for(has_push: bool) -> tuple[Step, ...]:
    """The steps of :data:`STEPS` a training pipeline runs (no push step without a push
    target): the rows whose :attr:`Step.needs` is not ``"push"``, and those too with
    ``has_push``."""
    return tuple(s for s in STEPS if s.needs is None or (s.needs == "push" and has_push))

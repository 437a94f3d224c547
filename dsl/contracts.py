"""The shared vocabulary of steps and artifacts: where components and pipelines meet.

Each step reads and writes *artifact directories* with a fixed layout. The local runner and the
KFP compiler (``estflow.pipelines``) wire them; the components (``estflow.components``) fill them.
Neither imports the other; both import this module.
"""

from __future__ import annotations

import dataclasses

__all__ = ["Step", "STEPS", "steps_for", "Files"]


@dataclasses.dataclass(frozen=True)
class Step:
    """A pipeline step: its name, the component module that runs it, its input artifacts (by the
    producing step's output name) and its outputs."""

    name: str
    module: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    description: str


STEPS = (
    Step("ingest", "estflow.components.ingest", (), ("examples",),
         "read CSV, validate rows, reject bad ones, split train/eval, write tf.Examples"),
    Step("transform", "estflow.components.transform", ("examples",), ("transformed",),
         "analyze + transform with Beam and tf.Transform"),
    Step("train", "estflow.components.train", ("transformed",), ("model",),
         "train the Estimator, checkpoint, export the serving SavedModel"),
    Step("evaluate", "estflow.components.evaluate", ("examples", "model"), ("evaluation",),
         "metrics on the eval split through the exported model"),
    Step("push", "estflow.components.push", ("model", "evaluation"), ("pushed",),
         "copy the export to <base>/<model_name>/<version>/ atomically"),
)


def steps_for(has_push: bool) -> tuple[Step, ...]:
    """The steps a pipeline runs (no push step without a push target)."""
    return STEPS if has_push else STEPS[:-1]


class Files:
    """File names inside artifact directories (the only place these strings are written)."""

    # ingest -> examples/
    TRAIN_EXAMPLES = "train"            # directory of TFRecord shards of raw tf.Examples
    EVAL_EXAMPLES = "eval"
    REJECTED = "rejected.jsonl"         # one JSON object per rejected row: file, line, row, reason
    INGEST_STATS = "ingest.json"
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
    # push -> pushed/
    PUSH_RESULT = "push.json"          # {"pushed": bool, ...}; {"pushed": false, "reasons"}
    KSERVE_MANIFEST = "inferenceservice.yaml"  # when PushTarget.kserve_manifest

    SPEC = "pipeline.json"              # the serialised Pipeline, written by the runner

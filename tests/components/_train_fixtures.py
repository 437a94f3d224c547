"""A real, tiny tf.Transform output in the transform step's contract layout, for train tests.

``build(out_dir)`` runs Beam + tf.Transform (in-memory FnApiRunner) over ~240 synthetic rows::

    out_dir/transform_fn/               TFTransformOutput dir
    out_dir/train/part-*.tfrecord.gz    transformed tf.Examples (GZIP)
    out_dir/eval/part-*.tfrecord.gz
    out_dir/transform.json              {"cardinalities": {"color": ...}, ...}

Raw columns: ``x`` (float, required, z-scored), ``z`` (float, default 0.0), ``color`` (string,
default "", vocabulary ids), ``label`` (int, required), ``target`` (float, default 0.0: a
regression label). Transformed features are dense ``[batch]`` tensors, like the real step's.

Beam + tf.Transform may crash at interpreter exit after finishing their work (see
docs/pages/architecture.md, "The local runner"), so tests call :func:`build_in_subprocess` and judge the run by its outputs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import estflow.dsl as ef

ROWS = 240
EVAL_EVERY = 5  # every 5th row goes to eval
COLORS = ("red", "green", "blue", "black")
RAW_DEFAULTS = {"z": 0.0, "color": "", "target": 0.0}


def make_rows(n: int = ROWS, seed: int = 0) -> list[dict]:
    """Raw rows as ingest would write them; some optional cells are missing (absent keys)."""
    import numpy as np

    r = np.random.RandomState(seed)
    rows = []
    for i in range(n):
        x = float(r.normal(3.0, 2.0))
        color = COLORS[r.randint(len(COLORS))]
        z = float(r.normal())
        signal = (x - 3.0) / 2.0 + (1.2 if color == "red" else -0.4) + 0.3 * z
        row = {"x": x, "label": int(signal + 0.3 * r.normal() > 0.2),
               "target": float(2.0 * signal + 0.1 * r.normal())}
        if i % 7:
            row["z"] = z
        if i % 11:
            row["color"] = color
        rows.append(row)
    return rows


def pipeline(model=None, **overrides) -> ef.Pipeline:
    """A Pipeline whose declarations match the fixture's columns and transformed features."""
    fields = dict(
        name="train-fixture",
        source=ef.CsvSource("unused.csv"),
        features=(ef.Numeric("x", normalize="z_score"),
                  ef.Numeric("z", default=0.0),
                  ef.CategoricalVocab("color", default="")),
        columns=(ef.Column("target", "float", default=0.0),),
        label=ef.Label("label"),
        model=model or ef.DNNClassifier(hidden_units=(8, 4),
                                        feature_columns=("x", "z", ef.Embedding("color", 3))),
        train=ef.TrainSpec(max_steps=60, batch_size=16, shuffle_buffer=64),
        run_config=ef.RunConfig(save_checkpoints_steps=30, save_summary_steps=20,
                                log_step_count_steps=20, steps_per_loop=10),
    )
    fields.update(overrides)
    return ef.Pipeline(**fields)


def _raw_spec(tf):
    return {"x": tf.io.FixedLenFeature([], tf.float32),
            "label": tf.io.FixedLenFeature([], tf.int64),
            "z": tf.io.VarLenFeature(tf.float32),
            "color": tf.io.VarLenFeature(tf.string),
            "target": tf.io.VarLenFeature(tf.float32)}


def preprocessing_fn(inputs):
    import tensorflow as tf
    import tensorflow_transform as tft

    def dense(name):
        default = tf.constant(RAW_DEFAULTS[name], inputs[name].dtype)
        value = tft.sparse_tensor_to_dense_with_shape(inputs[name], [None, 1], default)
        return tf.squeeze(value, axis=1)

    return {"x": tft.scale_to_z_score(inputs["x"]),
            "z": dense("z"),
            "color": tft.compute_and_apply_vocabulary(dense("color"), num_oov_buckets=1,
                                                      vocab_filename="color"),
            "label": inputs["label"],
            "target": dense("target")}


def _instance(row: dict) -> dict:
    """A raw row as tft instance-dict input (VarLen columns as lists)."""
    out = {"x": row["x"], "label": row["label"]}
    for name in ("z", "color", "target"):
        out[name] = [row[name]] if name in row else []
    return out


def build(out_dir: str) -> None:
    """Run the tiny Beam + tf.Transform job and write the contract layout into ``out_dir``."""
    import apache_beam as beam
    import tensorflow as tf
    import tensorflow_transform as tft
    import tensorflow_transform.beam as tft_beam
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner
    from tensorflow_transform.tf_metadata import dataset_metadata
    from tensorflow_transform.tf_metadata import metadata_io
    from tensorflow_transform.tf_metadata import schema_utils

    out = Path(out_dir)
    rows = [_instance(r) for r in make_rows()]
    splits = {"train": [r for i, r in enumerate(rows) if i % EVAL_EVERY],
              "eval": [r for i, r in enumerate(rows) if not i % EVAL_EVERY]}
    metadata = dataset_metadata.DatasetMetadata(
        schema_utils.schema_from_feature_spec(_raw_spec(tf)))
    with tempfile.TemporaryDirectory() as tmp, beam.Pipeline(runner=FnApiRunner()) as p:
        with tft_beam.Context(temp_dir=tmp, force_tf_compat_v1=False):
            train = p | "CreateTrain" >> beam.Create(splits["train"])
            evals = p | "CreateEval" >> beam.Create(splits["eval"])
            (t_train, t_meta), transform_fn = (
                (train, metadata) | "Analyze" >> tft_beam.AnalyzeAndTransformDataset(
                    preprocessing_fn))
            t_eval, _ = (((evals, metadata), transform_fn)
                         | "TransformEval" >> tft_beam.TransformDataset())
            _ = transform_fn | "WriteTransformFn" >> tft_beam.WriteTransformFn(
                str(out / "transform_fn"))
            for name, data in (("train", t_train), ("eval", t_eval)):
                coder = tft.coders.ExampleProtoCoder(t_meta.schema)
                _ = (data | f"Encode{name}" >> beam.Map(coder.encode)
                     | f"Write{name}" >> beam.io.WriteToTFRecord(
                         str(out / name / "part"), file_name_suffix=".tfrecord.gz"))
    # The raw schema too (tft's standard ``metadata/`` dir), for raw_feature_spec().
    metadata_io.write_metadata(metadata, str(out / "transform_fn" / "metadata"))
    tft_out = tft.TFTransformOutput(str(out / "transform_fn"))
    size = tft_out.vocabulary_size_by_name("color")
    stats = {"cardinalities": {"color": int(size) + 1},
             "rows": {k: len(v) for k, v in splits.items()}, "label": "label"}
    (out / "transform.json").write_text(json.dumps(stats, indent=2))


def build_in_subprocess(out_dir: str, timeout: float = 300) -> Path:
    """:func:`build` in a fresh interpreter; success is judged by the outputs it leaves."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "tests.components._train_fixtures", out_dir],
                          cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
    out = Path(out_dir)
    if not (out / "transform.json").exists():
        raise RuntimeError(f"fixture build failed (rc={proc.returncode}):\n{proc.stderr[-4000:]}")
    return out


_BUILT: dict[str, Path] = {}


def transformed(tmp_path_factory) -> Path:
    """The transform output, built once per test session however many test modules ask (each
    wraps this in its own ``transformed_dir`` fixture)."""
    if "dir" not in _BUILT:
        _BUILT["dir"] = build_in_subprocess(str(tmp_path_factory.mktemp("transformed")))
    return _BUILT["dir"]


def input_fn(transformed: Path, split: str, label: str, batch_size: int = 16, *,
             repeat: bool = True):
    """The train step's input_fn over one split of the fixture."""
    import tensorflow_transform as tft

    from estflow.components.train import __main__ as train

    spec = tft.TFTransformOutput(str(transformed / "transform_fn")).transformed_feature_spec()
    return train.make_input_fn(str(transformed / split / "*.tfrecord.gz"), spec, label,
                               batch_size, shuffle_buffer=64 if repeat else None, seed=1,
                               repeat=repeat)


def cardinalities(transformed: Path) -> dict[str, int]:
    return json.loads((transformed / "transform.json").read_text())["cardinalities"]


if __name__ == "__main__":
    build(sys.argv[1])
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown, where Beam + tft may crash (architecture.md)

"""Exporters: Latest (keeps N), Best (by compare_fn, best so far read back from eval event
files), Final (once); layout export_dir_base/<name>/<timestamp>, served SavedModels."""

import os
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from estflow.estimator import BestExporter
from estflow.estimator import EvalSpec
from estflow.estimator import FinalExporter
from estflow.estimator import LatestExporter
from estflow.estimator import TrainSpec
from estflow.estimator import train_and_evaluate
from estflow.estimator._engine.reporting import write_scalars
from tests.components.estimator import _hook_fixtures as fx


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    est = fx.estimator(tmp_path_factory.mktemp("model"))
    est.train(fx.train_input_fn, max_steps=20)
    return est


def _serve(path, rows):
    examples = [tf.train.Example(features=tf.train.Features(feature={"x": tf.train.Feature(
        float_list=tf.train.FloatList(value=row))})).SerializeToString() for row in rows]
    return tf.saved_model.load(path).signatures["serving_default"](examples=tf.constant(examples))


def test_latest_exporter_layout_serving_and_garbage_collection(trained, tmp_path):
    exporter = LatestExporter("latest", fx.receiver_fn, exports_to_keep=2)
    base = str(tmp_path / "latest")
    exported = [exporter.export(trained, base, trained.latest_checkpoint(), {"loss": 1.0},
                                False) for _ in range(3)]
    assert all(isinstance(p, bytes) for p in exported)  # as tf.estimator's exporters
    paths = [os.fsdecode(p) for p in exported]
    assert all(os.path.dirname(p) == base and len(os.path.basename(p)) == 10 for p in paths)
    assert sorted(os.listdir(base)) == sorted(os.path.basename(p) for p in paths[1:])
    served = _serve(paths[-1], fx.X[:4])
    expected = np.concatenate([p["logits"][None] for p in trained.predict(fx.predict_input_fn)])
    np.testing.assert_allclose(served["logits"].numpy(), expected[:4], rtol=1e-6)


def test_latest_exporter_uses_the_given_checkpoint(trained, tmp_path):
    older = trained.latest_checkpoint().replace("-20", "-10")
    path = os.fsdecode(LatestExporter("old", fx.receiver_fn).export(trained, str(tmp_path),
                                                                      older, {}, False))
    expected = next(trained.predict(fx.predict_input_fn, checkpoint_path=older))["logits"]
    np.testing.assert_allclose(_serve(path, fx.X[:1])["logits"].numpy()[0], expected, rtol=1e-6)


def test_best_exporter_exports_only_improvements(trained, tmp_path):
    exporter = BestExporter("best", fx.receiver_fn, event_file_pattern=None, exports_to_keep=5)
    base = str(tmp_path / "best")
    ckpt = trained.latest_checkpoint()
    got = [exporter.export(trained, base, ckpt, {"loss": loss, "global_step": step}, False)
           for step, loss in ((10, 0.5), (20, 0.6), (30, 0.4), (40, 0.45))]
    assert [p is not None for p in got] == [True, False, True, False]
    assert len(os.listdir(base)) == 2

    def accuracy_higher(best_eval_result, current_eval_result):
        return current_eval_result["accuracy"] > best_eval_result["accuracy"]

    by_accuracy = BestExporter("acc", fx.receiver_fn, event_file_pattern=None,
                               compare_fn=accuracy_higher)
    got = [by_accuracy.export(trained, str(tmp_path / "acc"), ckpt, {"accuracy": a}, False)
           for a in (0.7, 0.9, 0.8)]
    assert [p is not None for p in got] == [True, True, False]


def test_best_exporter_reads_the_best_so_far_from_event_files(trained, tmp_path):
    """Preemption-safe: a restarted job's new exporter knows the earlier best."""
    write_scalars(trained.eval_dir(), 10, {"loss": 0.3})
    write_scalars(trained.eval_dir(), 20, {"loss": 0.35})
    exporter = BestExporter("best", fx.receiver_fn)
    base, ckpt = str(tmp_path / "best"), trained.latest_checkpoint()
    assert exporter.export(trained, base, ckpt, {"loss": 0.35, "global_step": 20}, False) \
        is None  # its own event (step 20) is not "earlier"; 0.3 at step 10 is better
    assert exporter.export(trained, base, ckpt, {"loss": 0.2, "global_step": 30}, False)


def test_final_exporter_only_exports_at_the_end(trained, tmp_path):
    exporter = FinalExporter("final", fx.receiver_fn)
    ckpt = trained.latest_checkpoint()
    assert exporter.export(trained, str(tmp_path), ckpt, {}, False) is None
    assert os.path.isdir(exporter.export(trained, str(tmp_path), ckpt, {}, True))


def test_tf_estimator_2_15_exporter_arguments_are_taken_with_the_nearest_behaviour(
        trained, tmp_path, caplog):
    """The arguments tf.estimator 2.15 accepted, as TF 1-era programs pass them (the full
    signature spelled out, e.g. GoogleCloudPlatform/cloudml-samples' census trainers'
    ``LatestExporter(name='export', serving_input_receiver_fn=serving_input_fn,
    assets_extra=None, as_text=False, exports_to_keep=5)``, with ``as_text=True`` or a float
    count): accepted before training, ``as_text`` with a warning (TF 2 writes binary)."""
    with caplog.at_level("WARNING", logger="estflow.estimator"):
        latest = LatestExporter(name="export", serving_input_receiver_fn=fx.receiver_fn,
                                assets_extra=None, as_text=True, exports_to_keep=2.0)
        best = BestExporter("best", fx.receiver_fn, as_text=True, exports_to_keep=1.0,
                            event_file_pattern=None)
        FinalExporter("final", fx.receiver_fn, as_text=True)
    assert caplog.text.count("as_text=True is ignored") == 3
    base = str(tmp_path / "export")
    ckpt = trained.latest_checkpoint()
    paths = [os.fsdecode(latest.export(trained, base, ckpt, {"loss": 1.0}, False))
             for _ in range(3)]
    assert sorted(os.listdir(base)) == sorted(os.path.basename(p) for p in paths[1:])
    assert os.path.isfile(os.path.join(paths[-1], "saved_model.pb"))
    assert best.export(trained, str(tmp_path / "best"), ckpt, {"loss": 1.0}, False)
    with pytest.raises(ValueError, match="positive number or None"):
        LatestExporter("l", fx.receiver_fn, exports_to_keep=-1.5)


def test_exporter_argument_errors_and_assets_extra(trained, tmp_path):
    with pytest.raises(ValueError, match="best_eval_result, current_eval_result"):
        BestExporter("b", fx.receiver_fn, compare_fn=lambda a, b: True)
    with pytest.raises(ValueError, match="exports_to_keep=0"):
        LatestExporter("l", fx.receiver_fn, exports_to_keep=0)
    with pytest.raises(ValueError, match="non-empty string"):
        FinalExporter("", fx.receiver_fn)
    source = tmp_path / "vocab.txt"
    source.write_text("a\nb\n")
    path = LatestExporter("assets", fx.receiver_fn, assets_extra={"v/vocab.txt": str(source)}
                          ).export(trained, str(tmp_path / "out"), None, {}, False)
    assert Path(os.fsdecode(path), "assets.extra", "v", "vocab.txt").read_text() == "a\nb\n"


def test_exporters_in_train_and_evaluate(tmp_path):
    est = fx.estimator(tmp_path)
    exporters = [BestExporter("best", fx.receiver_fn), FinalExporter("final", fx.receiver_fn)]
    result, exports = train_and_evaluate(
        est, TrainSpec(fx.train_input_fn, max_steps=30),
        EvalSpec(fx.eval_input_fn, start_delay_secs=0, throttle_secs=0, exporters=exporters))
    assert result["global_step"] == 30
    best_dir, final_dir = tmp_path / "export" / "best", tmp_path / "export" / "final"
    assert len(os.listdir(final_dir)) == 1 and exports[1].startswith(os.fsencode(final_dir))
    assert 1 <= len(os.listdir(best_dir)) <= 3  # the first evaluation always, then gains

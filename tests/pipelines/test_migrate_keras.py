"""``estflow migrate``'s Keras 2 -> Keras 3 reports (estflow.pipelines.migrate.keras): each
construct is reported with its line and replacement, and the text is left as it was."""

from __future__ import annotations

from estflow.pipelines.migrate.codemod import migrate_source

HEAD = "import tensorflow.compat.v1 as tf\n"


def _unresolved(body: str) -> list[tuple[int, str]]:
    m = migrate_source(HEAD + body)
    return [(c.line, c.message) for c in m.unresolved]


def test_a_v1_optimizer_compiled_into_a_keras_model_is_reported_through_a_name():
    found = _unresolved("model = tf.keras.Sequential()\n"
                        "optimizer = tf.train.GradientDescentOptimizer(0.2)\n"
                        "model.compile(loss='mse', optimizer=optimizer)\n")
    assert found == [(4, "compile(optimizer=tf.compat.v1.train.GradientDescentOptimizer): "
                      "Keras 3 compiles only Keras optimizers; use "
                      "tf.keras.optimizers.SGD(learning_rate)")]


def test_a_v1_optimizer_given_positionally_or_inline_is_reported():
    found = _unresolved("m = tf.keras.Sequential()\n"
                        "m.compile(tf.compat.v1.train.AdamOptimizer(0.1), 'mse')\n")
    assert [line for line, _ in found] == [3] and "Adam(learning_rate, epsilon=1e-8)" in found[0][1]


def test_keras_optimizers_and_v1_minimize_are_not_reported():
    assert _unresolved("m = tf.keras.Sequential()\n"
                       "m.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss='mse')\n"
                       "opt = tf.train.AdamOptimizer(0.1)\n"
                       "train_op = opt.minimize(1.0, global_step=tf.train.get_global_step())\n"
                       "re_compile = __import__('re').compile('x')\n") == []


def test_set_learning_phase_is_reported_and_kept():
    m = migrate_source(HEAD + "tf.keras.backend.set_learning_phase(True)\n")
    assert [(c.line, c.message.split(":")[0]) for c in m.unresolved] == [
        (2, "tf.keras.backend.set_learning_phase")]
    assert "set_learning_phase(True)" in m.source


def test_an_eval_strategy_other_than_the_training_one_is_reported():
    found = _unresolved(
        "config = tf.estimator.RunConfig(\n"
        "    train_distribute=tf.distribute.experimental.MultiWorkerMirroredStrategy(),\n"
        "    eval_distribute=tf.distribute.MirroredStrategy())\n")
    assert [line for line, _ in found] == [4]
    assert found[0][1].startswith("RunConfig(eval_distribute=MirroredStrategy) with "
                                  "train_distribute=experimental.MultiWorkerMirroredStrategy")
    assert _unresolved("s = tf.distribute.MirroredStrategy()\n"
                       "c = tf.estimator.RunConfig(train_distribute=tf.distribute."
                       "MirroredStrategy(), eval_distribute=tf.distribute.MirroredStrategy())\n"
                       ) == []

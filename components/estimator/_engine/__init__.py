"""The Estimator engine: the variable store, model_fn calls, the training loop and its driver
(hooks, checkpoints), evaluation and prediction, summaries, batch-first input fusion and the
hook protocol. The public tf.estimator-named modules sit one folder up."""

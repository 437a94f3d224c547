"""The transform step's internals: the tf.Transform ``preprocessing_fn`` built from the
declarations, the Beam job, column statistics and the report. Entry point:
``estflow.components.transform``."""

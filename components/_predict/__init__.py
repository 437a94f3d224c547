"""The batch prediction step's internals: the model it scores with, its scoring DoFn, the
output formats and sinks, the job and its summary (entry point: ``estflow.components.predict``)."""

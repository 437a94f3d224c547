"""The multi-worker train task's internals: training-job manifests (TFJob, TrainJob and its
runtime), TF_CONFIG of TrainJob pods, the submitter's identity, submit/follow/cleanup."""

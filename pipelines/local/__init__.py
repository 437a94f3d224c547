"""The local runner: ``estflow run`` on this machine (the embedded default).

* :mod:`.runner`: the entry point (:func:`~.runner.run_local`), with :mod:`.plan_run` (one run of a
  plan), :mod:`.schedule` (which steps run at once), :mod:`.processes`, :mod:`.prestart`,
  :mod:`.warm` and :mod:`.step_env` (a step's process), :mod:`.stopping` (Ctrl-C, SIGTERM),
  :mod:`.cluster` (multi-worker training as local processes);
* :mod:`.step_cache`: the content-keyed step cache; :mod:`.runs`: run records (``estflow runs``);
  :mod:`.files`: writing the runner's own files safely; :mod:`.preprocess_run`: ``estflow
  preprocess``.

The runner never imports TensorFlow or Beam: every step runs in its own process.
"""

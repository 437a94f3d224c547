"""Kubeflow Pipelines: compiling a Plan to KFP v2 IR and sending it to a KFP API.

* :mod:`.compiler`: ``estflow compile``'s entry point (:func:`~.compiler.compile_pipeline`);
  :mod:`.components` (one lightweight Python component per planned step), :mod:`.user_steps`,
  :mod:`.settings` (per-task settings), :mod:`.tasks` (the ``report`` exit handler, placement
  tasks), :mod:`.images`, :mod:`.lean`, :mod:`.backend` (what each KFP backend accepts);
* :mod:`.submit`: ``estflow submit``/``schedule``/``schedules`` against a KFP API, with
  :mod:`.connection` (login, answers checked), :mod:`.follow`, :mod:`.cron` and :mod:`.cron_zone`;
* :mod:`.rbac`: the manifests the platform team applies; :mod:`.goldens`: the golden YAML files.

Compiling imports kfp, never TensorFlow, Beam or ``estflow.components``.
"""

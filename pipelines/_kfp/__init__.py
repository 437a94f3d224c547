"""The KFP compiler's private parts (:mod:`estflow.pipelines.kfp_compiler` is the entry point).

* :mod:`.components`: one lightweight Python component per planned step;
* :mod:`.settings`: the per-task settings (:data:`~.settings.TASK_SETTINGS`);
* :mod:`.tasks`: the ``report`` exit handler and the ``<step>_placement`` tasks.
"""

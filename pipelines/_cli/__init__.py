"""The ``estflow`` command's definitions, one module per command group; :mod:`estflow.pipelines.cli`
holds ``main()`` and assembles them.

* :mod:`.init`: ``init`` (a first pipeline for a CSV file);
* :mod:`.compilation`: ``compile``;
* :mod:`.local_runs`: ``run`` and ``preprocess`` (the local runner);
* :mod:`.kfp_runs`: ``submit``, ``schedule`` and ``schedules`` (a Kubeflow Pipelines API);
* :mod:`.serving`: ``serve``;
* :mod:`.usage`: what they share: :class:`~.usage.UsageError` and loading a PIPELINE target.

Each command module has ``add_commands(commands)``, registering its parsers on what
``ArgumentParser.add_subparsers()`` returned; each parser's ``handler(args) -> int`` runs it.
:mod:`.backfill`'s also takes ``main`` (it runs ``estflow run`` once per span): no module here
imports :mod:`estflow.pipelines.cli`, which imports them.
"""

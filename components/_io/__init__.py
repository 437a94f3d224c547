"""Formats two or more steps share: the tf.Example codec, TFRecord files, the raw feature spec,
small JSON files and the model repository (``<base>/<name>/<version>``). A step package
(``ingest``, ``transform``, ``evaluate``, ``serve``, ...) never imports another: what they
share lives here, in :mod:`estflow.components._sources` or in
:mod:`estflow.components._statistics`."""

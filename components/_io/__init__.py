"""Formats two or more steps share: the tf.Example codec, TFRecord files, the raw feature spec,
small JSON files and the model repository (``<base>/<name>/<version>``). A step folder
(``_ingest``, ``_transform``, ``_evaluate``, ``_serve``, ``estimator``) never imports another:
what they share lives here."""

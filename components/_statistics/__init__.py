"""Dataset statistics, schema, anomalies and the data report, as TensorFlow Data Validation has
them: what ingest, validate, evaluate and batch prediction share.

:mod:`.statistics` computes a run's statistics per split and for the whole span
(tensorflow-metadata's ``DatasetFeatureStatisticsList``; a Beam CombineFn in ingest's and batch
prediction's pass, with :mod:`._sketch`'s mergeable quantile sketch and frequency counter) and
reads and writes them; :mod:`.schema` infers a ``Schema`` from them as TFDV's ``infer_schema``
does; :mod:`.anomalies` finds TFDV's anomaly kinds (``AnomalyInfo.Type`` names): statistics
against a schema, drift against a baseline, serving skew, with :mod:`.distance`'s L-infinity
and Jensen-Shannon distances; :mod:`.report` renders the data report (the anomalies, then the
statistics side by side). TFDV and Facets read what these write. The modules import Beam and
tensorflow-metadata (this ``__init__`` imports nothing): import them only in steps, never from
the DSL.
"""

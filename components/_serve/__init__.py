"""The serve step's internals. Entry point: ``estflow.components.serve``.

* :mod:`.http`: HTTP/1.1 (standard library only): an event loop owning the connections, a
  bounded pool of workers answering complete requests, timeouts and limits;
* :mod:`.rest`: TF Serving's REST API (routes, methods) over the model registry;
* :mod:`.codec`: JSON <-> tensors and tf.Examples, TF Serving's mapping;
* :mod:`.models`: discovery under the base path (confined to it), loading, hot-swapping;
* :mod:`.errors`: the error answered as ``{"error": ...}``.
"""

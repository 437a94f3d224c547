"""The serve step: TF Serving's REST API over the models under a base path.

``python -m estflow.components.serve`` runs :mod:`.__main__` (the command line), which calls
:func:`.step.run` (bind, load, serve until stopped). Its modules:

* :mod:`.server`: the running server (:func:`.server.serve`): HTTP, the models, the poll;
* :mod:`.noise`: TensorFlow's start-up logging, left out of the command line's output;
* :mod:`.http`: HTTP/1.1 (standard library only): an event loop owning the connections, a
  bounded pool of workers answering complete requests, timeouts and limits;
* :mod:`.rest`: TF Serving's REST API (routes, methods) over the model registry;
* :mod:`.codec`: JSON <-> tensors and tf.Examples, TF Serving's mapping;
* :mod:`.models`: discovery under the base path (confined to it), loading, hot-swapping;
* :mod:`.errors`: the error answered as ``{"error": ...}``.

The package imports nothing heavy (no TensorFlow, no Beam): a KFP task imports it and calls
:func:`main`, which imports the entry point only then.
"""


def main(argv: list[str] | None = None) -> int:
    """Run the step with command-line arguments (``__main__.main``); returns the exit status."""
    from estflow.components.serve.__main__ import main as entry_main

    return entry_main(argv)

"""The push step: publish a blessed model as a new integer-named version of its push target
(TF Serving's layout), once, with its lineage.

``python -m estflow.components.push`` runs :mod:`.__main__` (the command line). Its modules:
:mod:`.step` (the step: blessing, ``push.json``), :mod:`.publish` (a version published whole,
never overwritten, old ones pruned), :mod:`.guard` (one hold between "what is served?" and
publishing, per URL scheme), :mod:`.kserve` (the InferenceService and its serving copy),
:mod:`.rollout` (applying it on KServe).

The package imports nothing heavy (no TensorFlow): a KFP task imports it and calls
:func:`main`, which imports the entry point only then.
"""

from estflow.components.push.kserve import kserve_manifest
from estflow.components.push.kserve import kserve_name
from estflow.components.push.publish import Published
from estflow.components.push.publish import list_versions
from estflow.components.push.publish import publish_once
from estflow.components.push.publish import push_directory
from estflow.components.push.publish import push_to
from estflow.components.push.step import read_blessing
from estflow.components.push.step import run

__all__ = ["Published", "run", "main", "push_to", "push_directory", "publish_once",
           "list_versions", "kserve_manifest", "kserve_name", "read_blessing"]


def main(argv: list[str] | None = None) -> int:
    """Run the step with command-line arguments (``__main__.main``); returns the exit status."""
    from estflow.components.push.__main__ import main as entry_main

    return entry_main(argv)

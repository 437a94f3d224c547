"""Small JSON files: step results, statistics, run records.

One way to write them (:func:`write_json`: ``path`` first, atomic where the filesystem allows)
and to read them back. Local paths are written under a temporary name and renamed into place,
so a reader never sees half a file; URLs (``gs://``, ``s3://``, ...) go through Beam's
filesystems, which a Beam job's workers can reach.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["write_json", "read_json", "take_json"]


def _is_url(path: str | os.PathLike) -> bool:
    return "://" in str(path)


def write_json(path: str | os.PathLike, value: Any) -> None:
    """Write ``value`` as JSON to ``path`` (sorted keys; anything else as its ``str``)."""
    text = json.dumps(value, indent=2, sort_keys=True, default=str) + "\n"
    if _is_url(path):
        # Only remote paths need Beam's filesystems; steps that never write one (train,
        # push) do not pay for importing Beam.
        from apache_beam.io.filesystems import FileSystems
        with FileSystems.create(str(path)) as handle:
            handle.write(text.encode("utf-8"))
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def read_json(path: str | os.PathLike) -> Any:
    """Read the JSON file at ``path`` (a local path or a URL)."""
    if _is_url(path):
        from apache_beam.io.filesystems import FileSystems
        with FileSystems.open(str(path)) as handle:
            return json.loads(handle.read().decode("utf-8"))
    return json.loads(Path(path).read_text())


def take_json(path: str | os.PathLike) -> Any:
    """Read, then delete, a JSON file a finished job left for its driver (statistics)."""
    value = read_json(path)
    if _is_url(path):
        from apache_beam.io.filesystems import FileSystems
        FileSystems.delete([str(path)])
    else:
        os.remove(path)
    return value

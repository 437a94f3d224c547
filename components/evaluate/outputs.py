"""A model's outputs on the eval rows, kept with it so that scoring it again as a baseline on the
same rows is not needed.

The evaluate step writes the candidate's outputs (one per eval row, in the order read) to
``evaluation/eval_outputs.npz``, with what they were computed on: the head, the eval files'
names and sizes, how many rows were read and a digest of those serialized rows. The push step
publishes them with the model (``assets.extra/estflow_eval_outputs.npz``; servers ignore
``assets.extra``). When a later evaluation finds that version served (its baseline) and the eval
files have the same names and sizes, it scores only the candidate; once the candidate's pass
has read the rows, their digest decides: the same rows, the stored outputs are the baseline's
(the model's files and the rows are what made them); other rows, the baseline is scored as
before. A retraining whose eval split did not change (a model-only change, a rerun) thus loads
and scores one model instead of two. Nothing is reused on a guess: a format, head, limit or
digest that differs, or an unreadable file, means the baseline is scored.

The file is a plain ``.npz`` (no pickles): ``outputs`` (float32: ``[rows]`` for binary and
regression heads, ``[rows, classes]`` for multi-class) and ``meta``, a JSON text::

    {"format": 1, "head": "binary", "rows": 2967, "limit": null,
     "files": [["eval-00000-of-00001.tfrecord.gz", 201733]], "digest": "sha256:..."}
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
from pathlib import Path

import numpy as np

from estflow.components._io import model_repo
from estflow.dsl.contracts import Files

__all__ = ["Stored", "RowDigest", "files_of", "write", "read_matching", "FORMAT"]

FORMAT = 1


class RowDigest:
    """The digest of serialized rows, fed batch by batch in the order they are scored: SHA-256
    over each row's length (8 bytes, little-endian) and bytes, so it depends on the rows and
    their order, not on how they were batched."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()

    def update(self, records) -> None:
        """Add a batch (a sequence of ``bytes``)."""
        update = self._hash.update
        for record in records:
            update(len(record).to_bytes(8, "little"))
            update(record)

    def hexdigest(self) -> str:
        return "sha256:" + self._hash.hexdigest()


def files_of(eval_files: list[str]) -> list[list]:
    """``[[name, size], ...]`` of the eval files, in order (what a cheap check compares)."""
    return [[os.path.basename(f), os.path.getsize(f)] for f in eval_files]


@dataclasses.dataclass(frozen=True)
class Stored:
    """Outputs read back, and what they were computed on."""

    outputs: np.ndarray
    meta: dict

    def same_rows(self, digest: str, rows: int) -> bool:
        """Whether these outputs are for exactly the rows just scored."""
        return self.meta.get("digest") == digest and self.meta.get("rows") == rows \
            and len(self.outputs) == rows


def write(folder: str | os.PathLike, outputs: np.ndarray, *, head: str, digest: str,
          eval_files: list[str], limit: int | None) -> Path:
    """Write ``folder/eval_outputs.npz`` (see the module docstring)."""
    meta = {"format": FORMAT, "head": head, "rows": int(len(outputs)), "limit": limit,
            "files": files_of(eval_files), "digest": digest}
    path = Path(folder) / Files.EVAL_OUTPUTS
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        np.savez(f, outputs=np.asarray(outputs, dtype=np.float32),
                 meta=np.asarray(json.dumps(meta, sort_keys=True)))
    return path


def read_matching(version_dir: str, *, head: str, eval_files: list[str],
                  limit: int | None) -> tuple[Stored | None, str]:
    """The outputs stored with the version at ``version_dir`` when they were computed with
    this head and limit on eval files of these names and sizes: (stored, "") or (None, why
    not). Whether the rows themselves are the same is known once they have been read
    (:meth:`Stored.same_rows`)."""
    path = f"{version_dir.rstrip('/')}/{Files.SERVED_EVAL_OUTPUTS}"
    try:
        data = model_repo.read_file(path)
    except FileNotFoundError:
        return None, "it carries no stored eval outputs"
    except Exception as e:  # noqa: BLE001 - unreadable: score the baseline instead
        return None, f"its stored eval outputs cannot be read ({type(e).__name__}: {e})"
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            outputs, meta = npz["outputs"], json.loads(str(npz["meta"]))
    except Exception as e:  # noqa: BLE001
        return None, f"its stored eval outputs are damaged ({type(e).__name__}: {e})"
    expected = {"format": FORMAT, "head": head, "limit": limit, "files": files_of(eval_files)}
    differs = [key for key, value in expected.items() if meta.get(key) != value]
    if differs:
        what = {"format": "another format", "head": "another head", "limit": "another limit",
                "files": "other eval files"}
        return None, ("its stored eval outputs were computed with "
                      + ", ".join(what[key] for key in differs))
    return Stored(outputs, meta), ""


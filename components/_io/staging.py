"""What every push destination's staging shares (:mod:`.model_repo`'s local and
``tf.io.gfile`` destinations, :mod:`.bucket_repo`'s buckets): a version is written under a
staging name servers ignore (:func:`staging_name`, :data:`STAGING_PREFIX`), and a copy is
checked against the export's file list (:func:`check_listing`) before and after it is
published."""

from __future__ import annotations

import uuid

__all__ = ["STAGING_PREFIX", "staging_name", "check_listing"]

STAGING_PREFIX = ".tmp-"


def staging_name(version: int) -> str:
    """A fresh staging directory name for ``version`` (ignored by servers: not an integer)."""
    return f"{STAGING_PREFIX}{version}-{uuid.uuid4().hex[:12]}"


def check_listing(found: dict[str, int], expected: dict[str, int], root: str, what: str,
                  ) -> None:
    """OSError unless ``found`` (relative path -> size, as listed under ``root``) is exactly
    ``expected``, naming a few missing and wrong-size files."""
    if found != expected:
        missing = sorted(set(expected) - set(found))
        wrong = sorted(k for k in found if k in expected and found[k] != expected[k])
        raise OSError(f"{what} at {root} does not match the export: expected "
                      f"{len(expected)} files, found {len(found)}; missing {missing[:5]}, "
                      f"wrong size {wrong[:5]}")

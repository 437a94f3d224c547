"""Staging on shared storage: the job's inputs copied to ``cluster.shared_dir`` and its model
copied back, on a local path (a PVC) or a URL (``gs://``, ``s3://``: estflow's storage module,
no tensorflow-io; other schemes through TensorFlow's filesystems, imported only then)."""

from __future__ import annotations

import shutil
from pathlib import Path

from estflow.components._io import storage

__all__ = ["is_url", "copytree", "write_text"]


def is_url(path: str) -> bool:
    """Whether ``path`` is a URL (``gs://...``) rather than a local path."""
    return "://" in path


def copytree(src: str, dst: str) -> None:
    """Copy a directory tree, locally or to/from a URL (gs://...)."""
    if not is_url(src) and not is_url(dst):
        shutil.copytree(src, dst, dirs_exist_ok=True)
        return
    if storage.is_remote(src) or storage.is_remote(dst):  # gs://, s3://: no tensorflow-io
        with storage.local_copy(src) as local:
            if storage.is_remote(dst):
                storage.upload_tree(local, dst)
            else:
                shutil.copytree(local, dst, dirs_exist_ok=True)
        return
    # TensorFlow's filesystems only when a URL is involved: a PVC run never imports it.
    import tensorflow as tf

    for root, _dirs, files in tf.io.gfile.walk(src):
        target = dst + root[len(src):]
        tf.io.gfile.makedirs(target)
        for file in files:
            tf.io.gfile.copy(f"{root}/{file}", f"{target}/{file}", overwrite=True)


def write_text(path: str, text: str) -> None:
    """Write a text file, locally or to a URL, making its directory."""
    if storage.is_remote(path):
        storage.write_bytes(path, text.encode("utf-8"))
        return
    if is_url(path):
        import tensorflow as tf  # see copytree

        tf.io.gfile.makedirs(path.rsplit("/", 1)[0])
        with tf.io.gfile.GFile(path, "w") as f:
            f.write(text)
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text)

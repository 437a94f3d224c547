"""What a killed step leaves behind, cleaned when a run continues (``estflow run --resume``).

The train step exports its SavedModel next to ``OUT_DIR/export`` under a temporary name,
``.export-new-<pid>``, and swaps it in (the old export retired as ``.export-old-<pid>`` for a
moment). A process killed meanwhile leaves them; a later train step removes those of processes
that are gone (:func:`clean_temporary_exports`), so a resumed run neither keeps nor ships them.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

__all__ = ["clean_temporary_exports"]

_TEMPORARY = re.compile(r"^\.(?P<name>.+)-(?:new|old)-(?P<pid>\d+)$")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_temporary_exports(model_dir: str | os.PathLike, name: str = "export") -> list[Path]:
    """Remove ``.<name>-new-<pid>`` / ``.<name>-old-<pid>`` directories in ``model_dir`` whose
    process is gone (this one's own are kept); return what was removed."""
    folder = Path(model_dir)
    if not folder.is_dir():
        return []
    removed = []
    for child in sorted(folder.iterdir()):
        match = _TEMPORARY.match(child.name)
        if not match or match["name"] != name or not child.is_dir():
            continue
        pid = int(match["pid"])
        if pid == os.getpid() or _alive(pid):
            continue
        shutil.rmtree(child, ignore_errors=True)
        removed.append(child)
    return removed

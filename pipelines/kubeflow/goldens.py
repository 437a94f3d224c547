"""Golden KFP YAML files of the example pipelines: regenerate them, or check them.

::

    python -m estflow.pipelines.kubeflow.goldens            # rewrite tests/pipelines/goldens/*.yaml
    python -m estflow.pipelines.kubeflow.goldens --check    # exit 1 if any golden is out of date

The tests compile the same targets with the same options (:data:`GOLDENS`, :func:`render`)
and compare them as ``--check`` does (:func:`same`): every byte but the stamp of the kfp
release that compiled the file, so a diff in a golden is a change of the compiled output to
review. Examples are named by module (not file path) so the output does not depend on the
current directory.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from estflow.pipelines import loader
from estflow.pipelines.kubeflow import compiler as kfp_compiler

__all__ = ["GOLDENS", "OPTIONS", "DEFAULT_DIR", "render", "comparable", "same", "main"]

# golden file name -> pipeline target; compiled with the compiler's defaults, plus the options
# of OPTIONS (the local taxi example pushes to a relative path, which a Kubeflow task cannot
# reach: it is compiled with a bucket, as `estflow compile --push-base-path` does).
GOLDENS: dict[str, str] = {
    "taxi.yaml": "estflow.pipelines.examples.taxi",
    "taxi_gpu.yaml": "estflow.pipelines.examples.taxi_gpu",
}
OPTIONS: dict[str, dict] = {
    "taxi.yaml": {"push_base_path": "gs://estflow-examples/serving_models"},
}

# In a source checkout (editable install), next to the tests that read them.
DEFAULT_DIR = Path(__file__).resolve().parents[2] / "tests" / "pipelines" / "goldens"


_SDK_VERSION = re.compile(rb"^sdkVersion: kfp-[0-9][^\n]*$", re.MULTILINE)


def comparable(compiled: bytes) -> bytes:
    """Compiled YAML as a golden compares it: with the stamp of the kfp release that compiled
    it (``sdkVersion: kfp-2.17.x``) left out, since ``kfp==2.17.*`` installs the newest patch
    release and the stamp is all a patch release changes in the output; every other byte
    counts."""
    return _SDK_VERSION.sub(b"sdkVersion: kfp-<release>", compiled)


def same(golden: bytes, fresh: bytes) -> bool:
    """Whether ``fresh`` compiled output matches ``golden`` (:func:`comparable`)."""
    return comparable(golden) == comparable(fresh)


def render(target: str, path: Path) -> None:
    """Compile ``target`` the way its golden is compiled, to ``path``."""
    options = next((OPTIONS.get(name, {}) for name, t in GOLDENS.items() if t == target), {})
    kfp_compiler.compile_pipeline(loader.load(target), path, **options)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m estflow.pipelines.kubeflow.goldens",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR,
                        help="goldens directory (default: %(default)s)")
    parser.add_argument("--check", action="store_true",
                        help="compare instead of writing; exit 1 when a golden differs")
    args = parser.parse_args(argv)
    if not args.check:
        args.dir.mkdir(parents=True, exist_ok=True)
    stale = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, target in GOLDENS.items():
            fresh = Path(tmp) / name
            render(target, fresh)
            golden = args.dir / name
            if golden.is_file() and same(golden.read_bytes(), fresh.read_bytes()):
                print(f"unchanged {golden}")
            elif args.check:
                stale.append(name)
                print(f"OUT OF DATE {golden}", file=sys.stderr)
            else:
                golden.write_bytes(fresh.read_bytes())
                print(f"wrote {golden}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())

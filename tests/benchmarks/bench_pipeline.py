"""Wall time of ``estflow run`` on the taxi example: cold (empty step cache, nothing served),
an identical rerun (every step reused, nothing pushed), and a run where only the model changed
(ingest and transform reused; train, evaluate and push run). Each is a fresh ``estflow run``
process, as a user runs it, in a scratch directory (its own ESTFLOW_HOME and push target).

Usage: ``python tests/benchmarks/bench_pipeline.py [--rounds 1] [--keep DIR]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TAXI = REPO / "pipelines" / "examples" / "taxi.py"
ESTFLOW = Path(sys.executable).parent / "estflow"

# The model-only change: the same pipeline with a wider DNN part (same steps, same data). Its
# file sits in the scratch directory next to a link to the example's data, so its data path
# (relative, as in the example) reads the same files.
MODEL_CHANGED = textwrap.dedent("""
    import dataclasses

    from estflow.pipelines.examples import taxi

    pipeline = dataclasses.replace(taxi.pipeline, model=dataclasses.replace(
        taxi.pipeline.model, dnn_hidden_units=(48, 24)))
""")


def _run(target: Path, folder: Path) -> tuple[float, dict]:
    """One ``estflow run``: (wall seconds, the run's record)."""
    env = {**os.environ, "ESTFLOW_HOME": str(folder / "estflow_runs"),
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    start = time.perf_counter()
    done = subprocess.run([str(ESTFLOW), "run", str(target)], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"estflow run {target} failed ({done.returncode}):\n"
                           f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    records = sorted((folder / "estflow_runs").glob("*/*/run.json"),
                     key=lambda p: p.stat().st_mtime)
    return wall, json.loads(records[-1].read_text())


def _statuses(record: dict) -> str:
    return ", ".join(f"{name} {step['status']}" for name, step in record["steps"].items())


def _pushed(record: dict) -> str:
    push = record.get("push") or {}
    if push.get("already_served"):
        return f"nothing pushed (version {push.get('version')} already serves it)"
    return f"pushed version {push.get('version')}" if push.get("pushed") else "not pushed"


def one_round(folder: Path) -> dict[str, float]:
    (folder / "data").symlink_to(TAXI.parent / "data", target_is_directory=True)
    changed = folder / "taxi_model_changed.py"
    changed.write_text(MODEL_CHANGED)
    walls, records = {}, {}
    for name, target in (("cold", TAXI), ("identical rerun", TAXI), ("model-only", changed)):
        walls[name], records[name] = _run(target, folder)
        print(f"  {name:<16} {walls[name]:6.2f}s  {_statuses(records[name])}; "
              f"{_pushed(records[name])}", flush=True)
    before, after = (records[n].get("estflow_code", {}).get("code")
                     for n in ("cold", "identical rerun"))
    if before != after:
        changed_steps = sorted(k for k in before if before[k] != after.get(k))
        print(f"  note: estflow's code of {', '.join(changed_steps)} changed between the runs "
              "(an edit in this checkout): those steps ran again; rerun the bench", flush=True)
    return walls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--keep", type=Path, default=None,
                        help="run in this (new) directory and keep it")
    args = parser.parse_args(argv)
    results: dict[str, list[float]] = {}
    for r in range(args.rounds):
        print(f"pipeline round {r + 1}: estflow run {TAXI.relative_to(REPO)}", flush=True)
        if args.keep:
            folder = args.keep / f"round-{r + 1}"
            folder.mkdir(parents=True)
            walls = one_round(folder)
        else:
            with tempfile.TemporaryDirectory(prefix="estflow-bench-") as tmp:
                walls = one_round(Path(tmp))
        for name, wall in walls.items():
            results.setdefault(name, []).append(wall)
    med = {name: statistics.median(v) for name, v in results.items()}
    cold = med["cold"]
    print(f"\npipeline (taxi example, wall of `estflow run`, medians of {args.rounds} "
          f"round(s))")
    for name, wall in med.items():
        print(f"{name:<18}{wall:8.2f}s  {wall / cold:5.2f}x of cold")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``estflow run`` as a user runs it, for the end-to-end tests: the ``estflow`` command of this
environment, in the pipeline's folder, with the user's environment (no ``ESTFLOW_*`` override,
nothing of pytest's), and the run's record read back from where a default run writes it
(``estflow_runs/<pipeline>/<run>/run.json`` beside the pipeline file)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

ESTFLOW = str(Path(sys.executable).parent / "estflow")


def user_env() -> dict[str, str]:
    """This process's environment without estflow's overrides and pytest's variables."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("ESTFLOW_", "PYTEST"))}


def estflow_run(folder: Path, pipeline_file: str, *args: str,
                timeout: float = 900) -> subprocess.CompletedProcess:
    """``estflow run PIPELINE_FILE ARGS...`` in ``folder`` (output captured as text)."""
    return subprocess.run([ESTFLOW, "run", pipeline_file, *args], cwd=folder, env=user_env(),
                          capture_output=True, text=True, timeout=timeout)


def run_record(folder: Path, pipeline: str, output: str | None = None) -> dict:
    """The record of pipeline ``pipeline``'s run: the one ``output``'s closing ``Run <id>:``
    line names, or the latest one with a record."""
    runs = folder / "estflow_runs" / pipeline
    if output is not None:
        run_id = next(line.split()[1].rstrip(":") for line in output.splitlines()
                      if line.startswith("Run "))
        return json.loads((runs / run_id / "run.json").read_text())
    latest = sorted(p for p in runs.iterdir() if (p / "run.json").exists())[-1]
    return json.loads((latest / "run.json").read_text())


def statuses(record: dict) -> dict[str, str]:
    """Step -> its status in a run's record (ran, reused, skipped, failed, ...)."""
    return {name: step["status"] for name, step in record["steps"].items()}


def tiny_csv(folder: Path, rows: int = 120, seed: int = 3) -> Path:
    """``folder/data.csv``: columns x, z (uniform in [0, 1)) and a binary label y = x + 0.3 z >
    0.6, ``rows`` rows drawn with ``seed``: a pipeline's data small enough to train in seconds."""
    rng = random.Random(seed)
    lines = ["x,z,y"] + [f"{(x := rng.random()):.4f},{(z := rng.random()):.4f},"
                         f"{int(x + 0.3 * z > 0.6)}" for _ in range(rows)]
    path = folder / "data.csv"
    path.write_text("\n".join(lines) + "\n")
    return path

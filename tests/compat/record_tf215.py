"""Record the corpus's figures on TF 2.15 + tensorflow-estimator 2.15 (the unmodified programs).

Run it in its own virtual environment (TF 2.15 cannot share one with estflow's TF 2.21)::

    python3.11 -m venv /root/venv-tf215
    /root/venv-tf215/bin/pip install 'tensorflow==2.15.*' 'tensorflow-estimator==2.15.*' 'pandas==2.1.*'
    /root/venv-tf215/bin/python tests/compat/record_tf215.py [--seeds 0 1 2] [PROGRAM_NAME ...]

(``tensorflow-cpu==2.15.1`` is the same TensorFlow, a smaller download; either is recorded as
``tensorflow``.)

pandas 2.1 is the pandas of TF 2.15's time (Nov 2023); pandas 3's copy-on-write and string dtype
break two of the notebooks on TF 2.15 itself.

Each program runs once per seed through ``harness.py`` (``--framework tf_estimator``), in a
subprocess; ``figures_tf215.json`` gets, per program, each run's ``evaluate()`` results, whether
it ran, and its time, plus the date and the versions. Naming programs re-records only those
(the others are kept from the existing file).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = os.path.join(HERE, "programs")
FIGURES = os.path.join(HERE, "figures_tf215.json")


def versions() -> dict:
    from importlib import metadata

    def version(name: str) -> str:  # tensorflow-cpu is the same TensorFlow
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            if name != "tensorflow":
                raise
            return metadata.version("tensorflow-cpu")

    return {"python": platform.python_version(),
            **{name: version(name) for name in (
                "tensorflow", "tensorflow-estimator", "keras", "pandas", "numpy")}}


def run(program: str, seed: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        env = dict(os.environ, PYTHONHASHSEED=str(seed), TF_CPP_MIN_LOG_LEVEL="2",
                   CUDA_VISIBLE_DEVICES="")
        proc = subprocess.run(
            [sys.executable, os.path.join(HERE, "harness.py"), program,
             "--framework", "tf_estimator", "--seed", str(seed), "--out", out],
            env=env, capture_output=True, text=True, timeout=1800)
        if not os.path.exists(out):
            return {"ok": False, "error": proc.stderr[-4000:], "seconds": None, "evaluations": []}
        with open(out) as f:
            return json.load(f)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="programs to (re-)record; default: all")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()

    names = args.names or sorted(f[:-3] for f in os.listdir(PROGRAMS) if f.endswith(".py"))
    figures = {"programs": {}}
    if args.names and os.path.exists(FIGURES):
        with open(FIGURES) as f:
            figures = json.load(f)
    figures.update(recorded=datetime.date.today().isoformat(), versions=versions(),
                   seeds=args.seeds, harness="tests/compat/harness.py --framework tf_estimator")
    for name in names:
        runs = []
        for seed in args.seeds:
            result = run(os.path.join(PROGRAMS, name + ".py"), seed)
            result["seed"] = seed
            runs.append(result)
            print(f"{name} seed={seed}: ok={result['ok']} seconds={result['seconds']} "
                  f"evaluations={result['evaluations']}", flush=True)
            if not result["ok"]:
                print(result["error"], flush=True)
        figures["programs"][name] = {"ok": all(r["ok"] for r in runs), "runs": runs}
    figures = {**{k: figures[k] for k in ("recorded", "versions", "seeds", "harness")},
               "programs": dict(sorted(figures["programs"].items()))}
    with open(FIGURES, "w") as f:
        json.dump(figures, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Wall time of ``estflow compile`` on the taxi example next to ``kfp dsl compile`` of an
equivalent hand-written KFP pipeline (five lightweight components wired by artifacts), each a
fresh process as a user runs it; medians of interleaved runs.

Usage: ``python tests/benchmarks/bench_compile.py [--rounds 5]``
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from targets import check  # tests/benchmarks/targets.py: a ratio, its target, a verdict

REPO = Path(__file__).resolve().parents[2]
TARGET = 1.2  # estflow compile's wall at most 1.2x kfp's own compile
BIN = Path(sys.executable).parent

HAND_WRITTEN = '''
from kfp import dsl
from kfp.dsl import Artifact, Dataset, Input, Model, Output

IMAGE = "ghcr.io/estflow/estflow:0.1.0"

@dsl.component(base_image=IMAGE, install_kfp_package=False)
def ingest(spec: str, source_root: str, examples: Output[Dataset]):
    from estflow.components import ingest as step
    step.main(["--spec", spec, "--examples", examples.path, "--source-root", source_root])

@dsl.component(base_image=IMAGE, install_kfp_package=False)
def transform(spec: str, examples: Input[Dataset], transformed: Output[Dataset]):
    from estflow.components import transform as step
    step.main(["--spec", spec, "--examples", examples.path, "--transformed", transformed.path])

@dsl.component(base_image=IMAGE, install_kfp_package=False)
def train(spec: str, transformed: Input[Dataset], model: Output[Model]):
    from estflow.components import train as step
    step.main(["--spec", spec, "--transformed", transformed.path, "--model", model.path])

@dsl.component(base_image=IMAGE, install_kfp_package=False)
def evaluate(spec: str, examples: Input[Dataset], model: Input[Model],
             evaluation: Output[Artifact]) -> bool:
    from estflow.components import evaluate as step
    step.main(["--spec", spec, "--examples", examples.path, "--model", model.path,
               "--evaluation", evaluation.path])
    return True

@dsl.component(base_image=IMAGE, install_kfp_package=False)
def push(spec: str, model: Input[Model], evaluation: Input[Artifact], pushed: Output[Artifact]):
    from estflow.components import push as step
    step.main(["--spec", spec, "--model", model.path, "--evaluation", evaluation.path,
               "--pushed", pushed.path])

@dsl.pipeline(name="chicago-taxi")
def taxi(spec: str = "{}", source_root: str = "module:estflow.pipelines.examples.taxi"):
    i = ingest(spec=spec, source_root=source_root)
    t = transform(spec=spec, examples=i.outputs["examples"])
    m = train(spec=spec, transformed=t.outputs["transformed"])
    e = evaluate(spec=spec, examples=i.outputs["examples"], model=m.outputs["model"])
    with dsl.If(e.outputs["Output"] == True):  # noqa: E712
        push(spec=spec, model=m.outputs["model"], evaluation=e.outputs["evaluation"])
'''


def _time(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "hand.py").write_text(HAND_WRITTEN)
        commands = {
            "estflow compile": [str(BIN / "estflow"), "compile",
                                str(REPO / "pipelines/examples/taxi.py"), "-o", "e.yaml",
                                "--push-base-path", "gs://estflow-examples/serving_models",
                                "--image", "ghcr.io/estflow/estflow:0.1.0"],
            "kfp dsl compile": [str(BIN / "kfp"), "dsl", "compile", "--py", "hand.py",
                                "--output", "k.yaml"],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, cmd in commands.items():
                times[name].append(_time(cmd, work))
    med = {name: statistics.median(ts) for name, ts in times.items()}
    print(f"compile wall time, medians of {args.rounds} interleaved fresh processes")
    for name, value in med.items():
        print(f"  {name:<16} {value:6.2f}s")
    check("estflow compile / kfp dsl compile", med["estflow compile"] / med["kfp dsl compile"],
          TARGET, at_most=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``estflow preprocess`` through the step cache: its outputs are the ingest and transform
steps' entries, so a later ``estflow run`` reuses them (and a preprocess after a run reuses
the run's).

The fused job (:data:`~estflow.dsl.contracts.PREPROCESS`: ingest and transform in one Beam job)
writes what the two steps write, given their options. With the options ``estflow run`` gives
them (the local in-memory runner, GZIP level 1, shards left to the runner), its outputs are
keyed as the run's: the training plan's fingerprint step keys the ingest and transform steps
(the same keys ``estflow run`` computes, :mod:`estflow.dsl.fingerprints`); when both have a
whole entry they are reused, else the fused job writes into both partial directories (holding
both keys' locks, ingest's first as a run takes them) and both entries are committed. The run
directory links ``preprocess/{examples,transformed}`` to the entries, as a run links its steps'
outputs.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

from estflow.dsl.contracts import PREPROCESS
from estflow.dsl.contracts import STEPS
from estflow.dsl.contracts import Files
from estflow.pipelines.local import runs
from estflow.pipelines.local.cluster import Topology
from estflow.pipelines.local.files import write_atomically
from estflow.pipelines.local.plan_run import PlanRun
from estflow.pipelines.local.runner import RunResult
from estflow.pipelines.local.step_cache import StepCache
from estflow.pipelines.plan import Plan
from estflow.pipelines.plan import build_plan
from estflow.pipelines.plan import build_preprocess_plan

__all__ = ["CACHED_STEPS", "run_preprocess"]

CACHED_STEPS = tuple(s.name for s in STEPS if set(s.outputs) & set(PREPROCESS.outputs))
"""The training steps whose entries ``estflow preprocess`` reuses or makes, in lock order: those
writing what the fused job writes (ingest, transform)."""


def run_preprocess(pipeline, source_root: str, workdir: Path, *,
                   echo: Callable[[str], None] = print,
                   cache: StepCache | None = None) -> RunResult:
    """Run (or reuse) the preprocessing of ``pipeline`` with ``estflow run``'s options, its
    outputs in the step cache (default: :func:`runs.cache_root`) and linked under
    ``workdir/preprocess``.

    Raises:
        StepFailed: the fingerprint step or the fused job failed (no entry is committed).
        KeyboardInterrupt: Ctrl-C (the partial directories stay, as a stopped step's do).
    """
    cache = cache or StepCache(runs.cache_root())
    preprocess = build_preprocess_plan(pipeline, source_root=source_root).steps[0]
    keying = build_plan(pipeline, source_root=source_root)
    plan = Plan(pipeline=pipeline, steps=(preprocess,), fingerprint=keying.fingerprint)
    run = PlanRun(plan, workdir, echo, {}, Topology(), cache, set(), False, None)
    workdir.mkdir(parents=True, exist_ok=True)
    spec = workdir / Files.SPEC
    write_atomically(spec, pipeline.to_json())
    run.fingerprint(spec)
    keys = {name: run.keys[name] for name in CACHED_STEPS}
    outputs = {artifact: name for name in CACHED_STEPS for artifact in keys[name]["outputs"]}
    folder = workdir / preprocess.name
    folder.mkdir(parents=True, exist_ok=True)
    echo(f"==> step 1/1: {preprocess.name} ({preprocess.description})")
    with cache.claim((name, keys[name]["key"]) for name in CACHED_STEPS):
        entries = _whole(cache, keys)
        reused = entries is not None
        if not reused:
            with contextlib.ExitStack() as locks:
                for name in CACHED_STEPS:
                    locks.enter_context(cache.lock(name, keys[name]["key"]))
                entries = _whole(cache, keys)  # another run made them meanwhile
                reused = entries is not None
                if not reused:
                    entries = _make(run, cache, keys, outputs, folder, spec)
        run._artifacts(preprocess, folder,  # noqa: SLF001 - links into the run directory
                       {a: entries[outputs[a]].artifact(a) for a in preprocess.outputs})
        for entry in entries.values():
            cache.touch(entry)
    if reused:
        made = {e.info.get("run") or "an earlier run" for e in entries.values()}
        run.reused.append(preprocess.name)
        echo(f"<== {preprocess.name} reused: the {' and '.join(CACHED_STEPS)} steps' cache "
             f"entries (keys {', '.join(keys[n]['key'][:12] for n in CACHED_STEPS)}), made by "
             f"{', '.join(sorted(made))}")
    return RunResult(workdir, {a: Path(p) for a, p in run.paths.items()}, run.seconds,
                     tuple(run.reused))


def _whole(cache: StepCache, keys: dict) -> dict | None:
    """The ingest and transform entries when both are whole (None: at least one is not)."""
    entries = {name: cache.lookup(name, keys[name]["key"]) for name in CACHED_STEPS}
    if any(e is None or e.damage for e in entries.values()):
        return None
    return entries


def _make(run: PlanRun, cache: StepCache, keys: dict, outputs: dict, folder: Path,
          spec: Path) -> dict:
    """Run the fused job into the partial directories of both keys and commit both."""
    partial = {name: cache.partial(name, keys[name]["key"], fresh=True)
               for name in CACHED_STEPS}
    step = run.plan.steps[0]
    where = {a: partial[outputs[a]] / a for a in step.outputs}
    start = time.monotonic()
    run._run(step, folder, str(spec), where, {})  # noqa: SLF001 - the runner's own step run
    seconds = round(time.monotonic() - start, 3)
    return {name: cache.commit(name, keys[name]["key"], {
        "run": f"estflow preprocess ({run.workdir.name})", "run_dir": str(run.workdir),
        "seconds": seconds, "outputs": keys[name]["outputs"]}) for name in CACHED_STEPS}

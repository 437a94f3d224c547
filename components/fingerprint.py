"""The fingerprint step: the first task of every run, local or on Kubeflow. It reads what the
steps' cache keys need from outside the spec and keys every step of the plan.

``python -m estflow.components.fingerprint --spec S --fingerprints OUT_DIR --plan PLAN_JSON
[--source-root ROOT]``

It reads (without downloading data or importing TensorFlow, for local, ``gs://`` and
``s3://`` sources and push targets): the source's fingerprint, the source of the user
functions the spec names (their source and their helpers', not where they are), estflow's
code, and the lineage of the version served at the push target
(:mod:`estflow.components._io.outside_facts`, :mod:`estflow.components._io.user_code`,
:mod:`estflow.components._io.lineage`);
then it computes each step's key and the part of the spec the step gets
(:func:`estflow.dsl.fingerprints.step_keys`), and writes ``OUT_DIR/fingerprints.json``::

    {"source": {"digest": ..., "objects": [...]},
     "code": {"derive.fn": {"function": "big_tipper", "digest": ..., "parts": {name: sha256}}},
     "estflow": {"version", "code": {module: digest}},
     "served": {"version", "path", "fingerprint"} | null,
     "steps": {"ingest": {"key", "spec", "inputs", "outputs", "cacheable", "context"}, ...}}

The local runner reuses a step whose key it has seen complete; the compiled KFP pipeline feeds
each key (and spec) to its step's task as inputs, so KFP's cache does the same.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from estflow.components._io import lineage
from estflow.components._io import outside_facts
from estflow.components._io import user_code
from estflow.components._io.jsonfile import write_json
from estflow.components._runtime import entry
from estflow.components._sources import spans
from estflow.components._sources.spans import EXIT_BLOCKED
from estflow.dsl import fingerprints
from estflow.dsl.contracts import FINGERPRINT
from estflow.dsl.contracts import Files
from estflow.dsl.pipeline import Pipeline

__all__ = ["run", "main", "gather"]


def gather(pipeline: Pipeline, source_root: str | None, modules: list[str], *,
           clients: dict | None = None) -> fingerprints.Facts:
    """The outside facts of ``pipeline``'s run (``modules``: the steps' entry points)."""
    root = entry.resolve_source_root(source_root)
    source = ({"kind": None, "digest": None} if pipeline.source is None else
              outside_facts.source_fingerprint(pipeline.source, root, clients=clients))
    functions = {path: user_code.function_facts(ref)
                 for path, ref in fingerprints.callable_paths(pipeline).items()}
    served = None
    if pipeline.push is not None:
        served = lineage.served(pipeline.push.base_path, pipeline.push.model_name,
                                clients=clients)
    return fingerprints.Facts(estflow=outside_facts.estflow_fingerprint(modules),
                              source=source, served=served, functions=functions,
                              code={path: f["digest"] for path, f in functions.items()})


def run(pipeline: Pipeline, plan: list[fingerprints.StepKeyInput], out_dir: str,
        source_root: str | None = None, progress: entry.Progress | None = None, *,
        clients: dict | None = None, modules: dict[str, str] | None = None) -> dict:
    """Fingerprint the run and key its steps; write and return ``fingerprints.json``'s
    content. ``modules``: step name -> entry module (for the code digests; default: the
    step names' ``estflow.components`` modules)."""
    progress = progress or entry.Progress("fingerprint")
    modules = modules or {s.name: f"estflow.components.{s.name}" for s in plan}
    facts = gather(pipeline, source_root, sorted(set(modules.values())), clients=clients)
    estflow = {"version": facts.estflow["version"],
               "code": {name: facts.estflow["code"][module] for name, module in modules.items()}}
    keys = fingerprints.step_keys(pipeline, plan, dataclasses.replace(
        facts, estflow={"version": estflow["version"]}), code_by_step=estflow["code"])
    result = {"source": facts.source, "code": dict(facts.functions or {}), "estflow": estflow,
              "served": facts.served, "steps": {name: k.to_dict() for name, k in keys.items()}}
    write_json(Path(out_dir) / Files.FINGERPRINTS, result)
    progress(_describe(facts))
    return result


def _describe(facts: fingerprints.Facts) -> str:
    source = facts.source
    if source.get("volatile"):
        data = f"source is volatile ({source['volatile']})"
    elif source.get("objects") is not None:
        data = f"source: {len(source['objects'])} object(s), digest {source['digest'][:12]}"
    else:
        data = f"source digest {str(source.get('digest'))[:12]}"
    served = facts.served
    target = ("served: none" if served is None else
              f"served: version {served['version']}" + (
                  f" (model {served['fingerprint'][:12]})" if served.get("fingerprint")
                  else " (no lineage)"))
    return f"{data}; {target}"


def main(argv: list[str] | None = None) -> int:
    parser = entry.step_parser(FINGERPRINT, __doc__)
    args = parser.parse_args(argv)
    plan = fingerprints.StepKeyInput.list_from_json(args.plan)
    progress = entry.Progress("fingerprint")
    try:  # a source with spans nobody chose yet (Kubeflow): the run's span, then every key
        pipeline = spans.resolve(entry.load_pipeline(args.spec),
                                 entry.resolve_source_root(args.source_root),
                                 _resolved(args.span), _resolved(args.schedule_time),
                                 progress=progress)
    except spans.SpanMissing as err:
        progress(f"the data checks stopped the run before any step: {err}")
        return EXIT_BLOCKED
    run(pipeline, plan, args.fingerprints, args.source_root, progress,
        modules={s.name: s.module for s in plan if s.module})
    return 0


def _resolved(value: str) -> str:
    """A KFP placeholder (``{{$.pipeline_job_schedule_time_utc}}``) or a recurring run's macro
    (``[[ScheduledTime]]``) that the backend left unexpanded is no value (KFP v2 backends do
    not expand the macros: kubeflow/pipelines#12494)."""
    return "" if value.strip().startswith(("{{", "[[")) else value


if __name__ == "__main__":
    sys.exit(main())

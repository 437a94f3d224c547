"""What changed between two local runs and why each step ran again, for ``estflow runs diff``:
read from the runs' records and their fingerprint step's output (``fingerprints.json``: each
step's key, inputs and what outside the spec its key covers), which name each user function's
parts (``"derive.fn": {"function", "digest", "parts": {definition: sha256}}``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from estflow.dsl.contracts import FINGERPRINT
from estflow.dsl.contracts import STEPS
from estflow.dsl.contracts import Files
from estflow.pipelines.local import runs

__all__ = ["fingerprints_of", "function_changes", "step_lines", "is_placement",
           "estflow_code_line"]


def fingerprints_of(record: runs.RunRecord) -> dict:
    """The run's ``fingerprints.json`` ({} when it has none, e.g. it stopped before)."""
    path = Path(record.run_dir) / FINGERPRINT.name / FINGERPRINT.outputs[0] / Files.FINGERPRINTS
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _functions(record: runs.RunRecord, found: dict) -> dict[str, dict]:
    code = found.get("code") or record.data.get("code") or {}
    return {p: f for p, f in code.items() if isinstance(f, dict)}  # older runs: ref -> digest


def function_changes(a: runs.RunRecord, b: runs.RunRecord, fa: dict, fb: dict
                     ) -> dict[str, str]:
    """Spec path of each user function whose code changed -> ``"big_tipper: source changed"``
    (its own source), ``"model_fn: helper scale changed"`` (a definition it uses)."""
    before, after = _functions(a, fa), _functions(b, fb)
    changes = {}
    for path in sorted(set(before) | set(after)):
        was, now = before.get(path), after.get(path)
        if was is None or now is None:
            name = (now or was)["function"]
            changes[path] = f"{name}: {'added' if was is None else 'removed'}"
        elif was["digest"] != now["digest"]:
            changes[path] = f"{now['function']}: {_what_changed(was, now)}"
    return changes


def _what_changed(was: dict, now: dict) -> str:
    if was["function"] != now["function"]:
        return f"now {now['function']} (was {was['function']})"
    if was.get("parts") is None or now.get("parts") is None:
        return "its file was not found (it runs every time)"
    own = now["function"].split(".")[0]
    parts_a, parts_b = was["parts"], now["parts"]
    changed = [p for p in sorted(set(parts_a) | set(parts_b)) if parts_a.get(p) != parts_b.get(p)]
    said = ["source changed"] if own in changed else []
    for part in (p for p in changed if p != own):
        verb = "added" if part not in parts_a else "removed" if part not in parts_b else "changed"
        said.append(f"helper {part} {verb}")
    return ", ".join(said) or "changed"


def is_placement(path: str, functions: dict[str, Any], source: dict) -> bool:
    """Whether spec field ``path`` only says where something is, which no key covers: a user
    function's module or file, a local source's path (its content is hashed)."""
    if any(path in (f"{p}.module", f"{p}.file") for p in functions):
        return True
    return path == "source.path" and bool(source.get("by_content"))


def _code(record: runs.RunRecord) -> dict[str, str]:
    """Step -> digest of the estflow code it ran (the run's ``estflow_code``)."""
    return (record.data.get("estflow_code") or {}).get("code") or {}


def estflow_code_line(a: runs.RunRecord, b: runs.RunRecord) -> str:
    """``estflow code: ...``: the steps both runs ran whose estflow code differs, and the
    version change. A step only one run has (``validate`` once checks are declared) is no
    code change: :func:`step_lines` says it was added or removed, and why."""
    code_a, code_b = _code(a), _code(b)
    edited = [step for step in code_b if step in code_a and code_a[step] != code_b[step]]
    version = (f" (version {a.data.get('estflow')} -> {b.data.get('estflow')})"
               if a.data.get("estflow") != b.data.get("estflow") else "")
    return "estflow code: " + (f"changed for {', '.join(edited)}" if edited else "same") + \
        version


def _needs(name: str) -> str | None:
    """The Pipeline field whose declaration adds step ``name`` (``validate``: checks)."""
    return next((step.needs for step in STEPS if step.name == name), None)


def _in_one_run(name: str, absent_from: runs.RunRecord, added: bool,
                spec: list[tuple[str, Any, Any]]) -> str:
    """Why a step is in one run only: added or removed with the spec field that declares it
    (``validate``: ``checks``), else it did not run in the other (which stopped before it)."""
    field = _needs(name)
    if field and any(path == field or path.startswith(f"{field}.") for path, _, _ in spec):
        return (f"step added: the spec declares {field}" if added else
                f"step removed: the spec no longer declares {field}")
    return f"not run in {absent_from.run_id}"


def step_lines(a: runs.RunRecord, b: runs.RunRecord, fa: dict, fb: dict,
               spec: list[tuple[str, Any, Any]] | None = None) -> list[str]:
    """One line per step: its key, its status in each run and, when its key changed, why. A
    step only one run has is said to be added or removed, with the spec field that declares
    it when ``spec`` (the runs' :func:`runs.spec_changes`) changed it."""
    steps_a, steps_b = a.data.get("steps", {}), b.data.get("steps", {})
    functions = function_changes(a, b, fa, fb)
    lines = []
    for name in dict.fromkeys([*steps_a, *steps_b]):
        ka, kb = (s.get(name, {}).get("key") for s in (steps_a, steps_b))
        status = (f"{steps_a.get(name, {}).get('status', '-')} -> "
                  f"{steps_b.get(name, {}).get('status', '-')}")
        if (name in steps_a) != (name in steps_b):
            absent_from, added = (a, True) if name in steps_b else (b, False)
            lines.append(f"  {name}: {_in_one_run(name, absent_from, added, spec or [])}; "
                         f"{status}")
            continue
        if ka == kb and ka:
            lines.append(f"  {name}: same key ({str(ka)[:12]}); {status}")
            continue
        why = _why(name, a, b, fa, fb, functions)
        lines.append(f"  {name}: key changed ({str(ka)[:12]} -> {str(kb)[:12]}); {status}"
                     + (f": {'; '.join(why)}" if why else ""))
    return lines


def _why(name: str, a: runs.RunRecord, b: runs.RunRecord, fa: dict, fb: dict,
         functions: dict[str, str]) -> list[str]:
    """What of step ``name``'s key differs between the runs."""
    sa, sb = ((f.get("steps") or {}).get(name) or {} for f in (fa, fb))
    if not sa or not sb:
        return []
    why = []
    ca, cb = _code(a), _code(b)
    if ca.get(name) != cb.get(name) or a.data.get("estflow") != b.data.get("estflow"):
        why.append("estflow code changed")
    xa, xb = sa.get("context") or {}, sb.get("context") or {}
    for path in sorted(set(xa.get("code") or {}) | set(xb.get("code") or {})):
        if (xa.get("code") or {}).get(path) != (xb.get("code") or {}).get(path):
            why.append(f"{path} {functions.get(path, 'changed')}")
    if xa.get("source") != xb.get("source"):
        why.append("data changed")
    if xa.get("served") != xb.get("served"):
        why.append("served version changed")
    why += _spec_fields(sa, sb, xb.get("code") or {}, fb.get("source") or {})
    inputs_a, inputs_b = sa.get("inputs") or {}, sb.get("inputs") or {}
    why += [f"input {artifact} changed" for artifact in inputs_b
            if inputs_a.get(artifact) != inputs_b[artifact]]
    return why


def _spec_fields(sa: dict, sb: dict, functions: dict, source: dict) -> list[str]:
    try:
        spec_a, spec_b = json.loads(sa["spec"]), json.loads(sb["spec"])
    except (KeyError, TypeError, ValueError):
        return []
    paths = [p for p, _, _ in runs.spec_changes(spec_a, spec_b)
             if not is_placement(p, functions, source)]
    return [f"spec {', '.join(paths)} changed"] if paths else []

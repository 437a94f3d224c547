"""The run record (``run.json``) is saved by one step's thread while the others change it: steps
running at once (``estflow run``'s parallel execution) each update their own entry and save the
whole record. A save must never fail on a change made meanwhile (it did: "dictionary changed
size during iteration", ending a run that had every step succeed), and what it writes is a
record as it was at some moment: valid JSON holding every step added before the save began.
The runner saves under a lock (one save at a time); the steps' changes take none."""

from __future__ import annotations

import json
import threading

from estflow.pipelines.local.runs import RunRecord


def test_saves_while_other_threads_add_and_change_steps(tmp_path):
    record = RunRecord.start(tmp_path / "run", "spec", version="test")
    stop = threading.Event()
    errors: list[BaseException] = []

    def change(worker: int) -> None:
        i = 0
        while not stop.is_set():  # 100 steps each, added, then changed again and again
            step = record.step(f"step_{worker}_{i % 100}")  # a new key in data["steps"]
            step.pop("outputs", None)
            step.update(status="running", outputs={f"a{j}": {"path": "x" * 20} for j in range(5)})
            step["status"] = "ran"
            i += 1

    saving = threading.Lock()  # as the runner saves: one save at a time, changes any time

    def save() -> None:
        try:
            for _ in range(60):
                with saving:
                    record.save()
        except BaseException as err:  # noqa: BLE001 - the test reports it
            errors.append(err)

    changers = [threading.Thread(target=change, args=(w,)) for w in range(2)]
    savers = [threading.Thread(target=save) for _ in range(2)]
    for t in changers + savers:
        t.start()
    for t in savers:
        t.join()
    stop.set()
    for t in changers:
        t.join()
    assert not errors, errors[0]
    record.save()
    saved = json.loads(record.path.read_text())
    assert saved["steps"] == record.data["steps"] and len(saved["steps"]) == 200

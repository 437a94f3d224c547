"""Where a search keeps its trials: an Optuna study in a journal file on disk, one folder per
search key, which a search stopped at any moment (even by SIGKILL) continues from.

Layout of a study folder (``<study_dir>/<key>/``)::

    journal.log        Optuna's JournalStorage: one JSON line per change, appended and fsynced
    journal.lock       the journal's lock (flock: released by the kernel when its holder dies)
    search.lock        held for the whole search: one search of a study at a time
    trials/<number>/   each trial's spec, logs, evaluation (and model, when kept)

A search holds ``search.lock`` while it runs; a second search of the same study waits for it
(and then reuses its trials). Holding it, a search knows that a trial left RUNNING was being
trained by a search that died: :func:`recover` marks it failed (``interrupted``) and queues a
trial with the same values in its place (Optuna's ``RetryFailedTrialCallback`` does the same
with heartbeats, after a grace period; the lock makes waiting unnecessary). A line the
journal's writer was killed in the middle of is cut off before the journal is opened.

The key (:func:`study_key`) is what makes two searches' trials comparable: the data, the
pipeline's declaration, and its search without the budget (``trials``, ``parallel``,
``timeout_s``, ``max_failures``): a rerun with a larger budget continues the same study.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from pathlib import Path

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from estflow.dsl.contracts import TUNE_STUDY_LOCK
from estflow.dsl.pipeline import Pipeline

__all__ = ["BUDGET_FIELDS", "INTERRUPTED", "RETRY_OF", "study_key", "data_digest",
           "search_lock", "open_study", "recover", "interrupt"]

BUDGET_FIELDS = ("trials", "parallel", "timeout_s", "max_failures")
"""The fields of :class:`~estflow.dsl.Tune` that say how much to search, not what: the
study's key leaves them out."""
_UNKEYED = ("push", "predict", "checks", "steps", "resources", "name")
"""Pipeline fields no trial reads (trials push nothing, run no user step, train locally)."""

INTERRUPTED = "estflow_interrupted"
"""System attribute of a trial failed because its search stopped while it ran (then retried
as the trial its value names); such a failure is not the trial's, nor counted."""
RETRY_OF = "retry_of"
"""User attribute of a trial queued in an interrupted one's place: that trial's number."""
STUDY_NAME = "tune"


def study_key(pipeline: Pipeline, data: str) -> str:
    """The key of the study of ``pipeline``'s search on the data whose digest is ``data``."""
    spec = json.loads(pipeline.to_json())
    for field in _UNKEYED:
        spec.pop(field, None)
    tune = spec.get("tune")
    if isinstance(tune, dict):
        for field in BUDGET_FIELDS:
            tune.pop(field, None)
    text = json.dumps({"data": data, "pipeline": spec}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def data_digest(folders: Iterable[str | os.PathLike]) -> str:
    """A digest of the files under ``folders`` (their paths in the folder and contents)."""
    digest = hashlib.sha256()
    for folder in folders:
        root = Path(folder)
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            digest.update(str(path.relative_to(root)).encode() + b"\0")
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):  # noqa: B023
                    digest.update(block)
            digest.update(b"\0")
    return digest.hexdigest()


class _Flock:
    """The journal's lock (what Optuna's ``JournalFileBackend`` calls: ``acquire``,
    ``release``): ``flock`` on a file of its own, which the kernel releases when the holder
    dies (Optuna's own locks are files left behind by a killed process, waited out for 30 s).
    Each acquire opens its own descriptor, so threads exclude each other too."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._held: list[int] = []

    def acquire(self) -> bool:
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        self._held.append(fd)
        return True

    def release(self) -> None:
        fd = self._held.pop()
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


@contextlib.contextmanager
def search_lock(folder: Path, waiting: Callable[[str], None]) -> Iterator[None]:
    """Hold the study's lock file (:data:`~estflow.dsl.contracts.TUNE_STUDY_LOCK` in
    ``folder``), waiting for another search of the study with a line saying so."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / TUNE_STUDY_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            waiting(f"another search of this study is running (pid {holder}): waiting for it")
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def _repair(journal: Path) -> None:
    """Cut off a last line without its newline (its writer was killed while writing it):
    Optuna would read every later line as an error."""
    if not journal.is_file():
        return
    with open(journal, "rb+") as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        keep = 0
        at = size
        while at > 0:
            step = min(at, 1 << 16)
            f.seek(at - step)
            block = f.read(step)
            newline = block.rfind(b"\n")
            if newline >= 0:
                keep = at - step + newline + 1
                break
            at -= step
        f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())


def open_study(folder: Path, *, direction: str, sampler: optuna.samplers.BaseSampler,
               pruner: optuna.pruners.BasePruner) -> optuna.Study:
    """The study in ``folder`` (created, or loaded with its trials); call with the search
    lock held."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # the step says what happens
    journal = folder / "journal.log"
    _repair(journal)
    storage = JournalStorage(JournalFileBackend(str(journal),
                                                lock_obj=_Flock(folder / "journal.lock")))
    return optuna.create_study(storage=storage, study_name=STUDY_NAME, direction=direction,
                               sampler=sampler, pruner=pruner, load_if_exists=True)


def recover(study: optuna.Study) -> list[tuple[int, int]]:
    """Fail the trials a dead search left RUNNING (marked :data:`INTERRUPTED`), each queued
    again with the same values; returns (interrupted trial, the trial in its place). Call with
    the search lock held (no live search runs a trial of the study)."""
    return [(trial.number, interrupt(study, trial))
            for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))]


def interrupt(study: optuna.Study, trial: optuna.trial.FrozenTrial | optuna.Trial) -> int:
    """Fail the RUNNING ``trial`` as :data:`INTERRUPTED` and queue its values again; returns
    the number of the trial queued."""
    storage = study._storage  # noqa: SLF001 - Optuna's own storage API
    trial_id = trial._trial_id  # noqa: SLF001
    params = storage.get_trial(trial_id).params
    retry = len(study.get_trials(deepcopy=False))
    storage.set_trial_system_attr(trial_id, INTERRUPTED, retry)
    storage.set_trial_state_values(trial_id, TrialState.FAIL)
    study.enqueue_trial(params, user_attrs={RETRY_OF: trial.number})
    return retry

"""The served models of ``estflow serve``: discovery, version policies, labels, hot-swapping.

Layout (TF Serving's, written by :mod:`estflow.components.push`)::

    BASE_PATH/<model_name>/<integer version>/saved_model.pb + variables/ [+ assets.extra/]

With a base path, a model is a subdirectory of BASE_PATH whose name matches
``[A-Za-z0-9][A-Za-z0-9._-]*`` and which holds at least one all-digit version directory
(dot-names such as push's ``.tmp-*`` staging are never looked at), served with TF Serving's
default policy: its latest version. With a model config (:mod:`.config`) the models are the
config's, each with its own directory, version policy (latest N, specific, all) and version
labels. A poll picks up new versions, loads and warms them off the request path, then swaps
them in under a lock; versions the policy no longer wants are dropped once a wanted one is
loaded (TF Serving's availability-preserving policy). A version that fails to load is logged
and reported by the status API, and retried only when its files change; the versions already
served keep serving.

Requests never touch the filesystem: they look names up in the in-memory registry. Nor can the
files lead outside a model's root (BASE_PATH, or a config model's base path): every model
directory, version directory and file is resolved (symlinks followed) and must lie inside it;
one that does not is refused like a version that fails to load. (The check runs just before a
load: a symlink swapped in between the two is not caught; whoever can do that can write the
base path.) Messages to clients never show the server's absolute paths: paths under a root are
given relative to it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from estflow.components._io.model_repo import version_dirs
from estflow.components.serve.config import LATEST_ONE
from estflow.components.serve.config import ModelConfig
from estflow.components.serve.errors import ServingError
from estflow.components.serve.models import MODEL_NAME_PATTERN
from estflow.components.serve.models import ServedModel
from estflow.components.serve.models import load_model

__all__ = ["ModelRegistry"]

log = logging.getLogger("estflow.serve")


class _Outside(Exception):
    """A path that resolves outside the base path (the message says where, for the log;
    ``path`` is the offending path, for the client)."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


def _inside(path: Path | str, base: Path) -> Path:
    """``path`` resolved; :class:`_Outside` unless it lies in ``base`` (resolved)."""
    real = Path(os.path.realpath(path))
    if not real.is_relative_to(base):
        raise _Outside(f"{path} resolves to {real}, outside the base path {base}", str(path))
    return real


def _scan(base_path: Path) -> tuple[dict[str, dict[int, Path]], dict[str, str]]:
    """(model name -> {version: directory} for every model under ``base_path``, model name ->
    why it is refused for model directories that resolve outside it)."""
    found, refused = {}, {}
    for child in sorted(base_path.iterdir()):
        if child.name.startswith(".") or not child.is_dir():
            continue
        if not MODEL_NAME_PATTERN.fullmatch(child.name):
            log.debug("ignoring %s: not a valid model name", child)
            continue
        try:
            _inside(child, base_path)
        except _Outside as e:
            log.debug("%s", e)
            refused[child.name] = str(e)
            continue
        versions = version_dirs(child)
        if versions:
            found[child.name] = versions
    return found, refused


def _inspect(folder: Path, base: Path) -> tuple:
    """Check that nothing in a version directory resolves outside ``base`` (raises
    :class:`_Outside` at the first such path, before descending into it); return a cheap
    identity of its files, to retry a failed load only when they change. Symlinks inside
    ``base`` are followed, each real directory walked once."""
    root = _inside(folder, base)
    seen = {root}
    entries = []
    for here, dirs, files in os.walk(root, followlinks=True):
        for name in list(dirs):
            path = os.path.join(here, name)
            if os.path.islink(path):
                real = _inside(path, base)
                if real in seen:
                    dirs.remove(name)
                seen.add(real)
        for name in files:
            path = os.path.join(here, name)
            if os.path.islink(path):
                _inside(path, base)
            try:
                stat = os.stat(path)
            except OSError:
                continue
            entries.append((os.path.relpath(path, root), stat.st_size, stat.st_mtime_ns))
    return tuple(sorted(entries))


@dataclasses.dataclass(frozen=True)
class _Failure:
    fingerprint: tuple
    message: str


@dataclasses.dataclass(frozen=True)
class _Found:
    """A model as one scan found it: its versions on disk and the root it is confined to."""

    config: ModelConfig
    versions: dict[int, Path]
    root: Path


class ModelRegistry:
    """The served versions of each model, under ``base_path`` or as ``configs`` list them.

    ``refresh()`` scans once (the poll thread calls it every ``poll_seconds``); request threads
    call ``get()``/``status()``/``version_for_label()``, which only read immutable snapshots.
    """

    def __init__(self, base_path: Path | None = None, *,
                 loader: Callable[..., ServedModel] = load_model,
                 sync: Callable[[], object] | None = None, source: str | None = None,
                 configs: list[ModelConfig] | None = None):
        if (base_path is None) == (configs is None):
            raise ValueError("a ModelRegistry needs a base_path or model configs (not both)")
        self.base_path = base_path
        self.configs = configs
        self.source = source or ("the model config" if configs else "the base path")
        self._roots = sorted({str(p) for p in ([base_path] if base_path else [])}
                             | {str(c.base_path) for c in configs or ()}, key=len, reverse=True)
        self._sync = sync  # copies a bucket's new versions into base_path before each scan
        self._loader = loader
        self._lock = threading.Lock()          # guards the swap of the snapshots below
        self._refresh_lock = threading.Lock()  # one scan-and-load at a time
        self._models: dict[str, dict[int, ServedModel]] = {}
        self._labels: dict[str, dict[str, int]] = {c.name: c.labels for c in configs or ()}
        self._refused: dict[str, str] = {}  # model name -> why its directory is not read
        self._failures: dict[tuple[str, int], _Failure] = {}
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None

    def public(self, text: str) -> str:
        """``text`` with the server's absolute paths given relative to their root."""
        for root in self._roots:
            text = text.replace(root + os.sep, "").replace(root, ".")
        return text

    def models(self) -> list[ServedModel]:
        """The latest served version of each model, by name."""
        with self._lock:
            return [versions[max(versions)] for _name, versions in sorted(self._models.items())
                    if versions]

    def versions(self, name: str) -> list[ServedModel]:
        """Every served version of model ``name``, newest first (empty: none)."""
        with self._lock:
            served = self._models.get(name, {})
            return [served[v] for v in sorted(served, reverse=True)]

    def version_for_label(self, name: str, label: str) -> int:
        """The version ``label`` names; a 400 for an unknown label, as in TF Serving."""
        with self._lock:
            labels = self._labels.get(name, {})
        if label not in labels:
            known = ", ".join(sorted(labels)) or "none"
            raise ServingError(400, f"Unrecognized servable version label: {label!r} of model "
                               f"{name!r} (its labels: {known})")
        return labels[label]

    def get(self, name: str, version: int | None = None, label: str | None = None) -> ServedModel:
        """The served model version (None: the latest served), or the one ``label`` names;
        a 404 :class:`ServingError` saying why there is none."""
        if label is not None:
            version = self.version_for_label(name, label)
        with self._lock:
            served = dict(self._models.get(name, {}))
            failures = {v: f for (n, v), f in self._failures.items() if n == name}
            refused = self._refused.get(name)
        if not served:
            raise self._not_found(name, refused, failures)
        if version is None:
            return served[max(served)]
        if version not in served:
            listed = ", ".join(map(str, sorted(served, reverse=True)))
            reason = (f"it failed to load: {failures[version].message}" if version in failures
                      else "not one its version policy serves")
            raise ServingError(404, f"Servable not found for request: Specific({name}, "
                               f"{version}): model {name!r} version {version} is not served "
                               f"({reason}); the served version"
                               f"{'s are' if len(served) > 1 else ' is'} {listed}")
        return served[version]

    def _not_found(self, name: str, refused: str | None, failures: dict) -> ServingError:
        if refused is not None:
            return ServingError(404, f"model {name!r} is not served: its directory resolves "
                                "outside the base path (the server's log says where)")
        if failures:
            newest = max(failures)
            return ServingError(404, f"model {name!r} is not available: version {newest} "
                                f"failed to load: {failures[newest].message}")
        return ServingError(404, f"Servable not found for request: Latest({name}): no model "
                            f"named {name!r} is served; served models: "
                            f"{', '.join(m.name for m in self.models()) or 'none'}")

    def status(self, name: str, version: int | None = None,
               label: str | None = None) -> list[dict[str, Any]]:
        """TF Serving's ``model_version_status`` entries: served versions (AVAILABLE) and
        versions that failed to load (END with the error), newest first."""
        if label is not None:
            version = self.version_for_label(name, label)
        with self._lock:
            served = set(self._models.get(name, {}))
            failures = {v: f for (n, v), f in self._failures.items() if n == name}
        entries = {v: _version_status(v, "END", "UNKNOWN", f.message)
                   for v, f in failures.items()}
        for v in served:
            entries[v] = _version_status(v, "AVAILABLE", "OK", "")
        if version is not None:
            if version not in entries:
                self.get(name, version)  # raises the 404 that explains what is served
            entries = {version: entries[version]}
        if not entries:
            self.get(name)  # raises 404: unknown model
        return [entries[v] for v in sorted(entries, reverse=True)]

    def refresh(self) -> None:
        """Scan; load the versions each model's policy wants that are not served yet."""
        with self._refresh_lock:
            found = self._find()
            if found is None:
                return
            for name, model in found.items():
                self._refresh_model(name, model)
            with self._lock:
                for name in set(self._models) - set(found):
                    if name not in self._refused:
                        log.warning("model %s has no versions left; no longer served", name)
                    del self._models[name]
                self._failures = {key: f for key, f in self._failures.items()
                                  if key[1] in found.get(key[0], _EMPTY).versions}

    def _find(self) -> dict[str, _Found] | None:
        """Each model's versions on disk (None: the base path cannot be read now)."""
        if self.configs is not None:
            return {c.name: _Found(c, _versions(c), c.base_path) for c in self.configs}
        if self._sync is not None:
            try:
                self._sync()
            except OSError as e:  # the bucket is unreachable now: keep serving the copy
                log.error("cannot copy new versions from %s (serving what was copied "
                          "before): %s", self.source, e)
        try:
            found, refused = _scan(self.base_path)
        except OSError as e:
            log.error("cannot scan %s: %s", self.base_path, e)
            return None
        for name, reason in refused.items():
            if self._refused.get(name) != reason:
                log.error("refusing model %s: %s (nothing outside the base path is read)",
                          name, reason)
        with self._lock:
            self._refused = refused
        return {name: _Found(ModelConfig(name, self.base_path / name, LATEST_ONE), versions,
                             self.base_path) for name, versions in found.items()}

    def _refresh_model(self, name: str, found: _Found) -> None:
        wanted = found.config.policy.select(found.versions)
        with self._lock:
            current = dict(self._models.get(name, {}))
        loaded = {v: current[v] for v in wanted if v in current}
        for version in sorted(wanted - set(current), reverse=True):
            model = self._load(name, version, found, current)
            if model is not None:
                loaded[version] = model
        if not loaded:  # availability preserving: keep what serves until a wanted one loads
            return
        with self._lock:
            self._models[name] = loaded
        for version in sorted(set(loaded) - set(current)):
            dropped = sorted(set(current) - set(loaded))
            log.info("serving model %s version %s%s", name, version,
                     f" (no longer serving {', '.join(map(str, dropped))})" if dropped else "")

    def _load(self, name: str, version: int, found: _Found,
              current: dict[int, ServedModel]) -> ServedModel | None:
        """Load one version, or record (and log once) why it cannot be."""
        failure = self._failures.get((name, version))
        still = (f"; still serving version {', '.join(map(str, sorted(current)))}"
                 if current else "")
        try:
            fingerprint = _inspect(found.versions[version], found.root)
        except _Outside as e:
            message = (f"refused: {self.public(e.path)} resolves outside the base path (the "
                       "server's log says where)")
            if failure is None or failure.message != message:
                log.error("model %s version %s refused: %s (nothing outside the base path is "
                          "read)%s", name, version, e, still)
                with self._lock:
                    self._failures[(name, version)] = _Failure(("outside", message), message)
            return None
        if failure is not None and failure.fingerprint == fingerprint:
            return None
        log.info("loading model %s version %s from %s ...", name, version,
                 found.versions[version])
        try:
            model = self._loader(name, version, found.versions[version])
        except Exception as e:  # noqa: BLE001 - any load failure keeps the old version serving
            message = self.public(f"{type(e).__name__}: {e}".splitlines()[0][:500])
            log.error("model %s version %s failed to load from %s: %s%s", name, version,
                      found.versions[version], message, still)
            with self._lock:
                self._failures[(name, version)] = _Failure(fingerprint, message)
            return None
        with self._lock:
            self._failures.pop((name, version), None)
        return model

    def start_polling(self, poll_seconds: float) -> None:
        """Refresh every ``poll_seconds`` in a daemon thread until :meth:`stop`."""
        def loop() -> None:
            while not self._stop.wait(poll_seconds):
                try:
                    self.refresh()
                except Exception:  # noqa: BLE001 - the poller must outlive one bad scan
                    log.exception("model refresh failed")

        self._poller = threading.Thread(target=loop, name="estflow-serve-poll", daemon=True)
        self._poller.start()

    def stop(self) -> None:
        self._stop.set()
        if self._poller is not None:
            self._poller.join()


_EMPTY = _Found(ModelConfig("", Path()), {}, Path())


def _versions(config: ModelConfig) -> dict[int, Path]:
    """The version directories of a config model (none when its base path is unreadable)."""
    try:
        return version_dirs(config.base_path)
    except OSError as e:
        log.error("cannot read the versions of model %s: %s", config.name, e)
        return {}


def _version_status(version: int, state: str, code: str, message: str) -> dict[str, Any]:
    return {"version": str(version), "state": state,
            "status": {"error_code": code, "error_message": message}}

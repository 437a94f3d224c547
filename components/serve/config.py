"""Which models ``estflow serve`` serves and which of their versions: TF Serving's model config.

Two sources, as with ``tensorflow_model_server``:

* a base path (``estflow serve BASE_PATH``): every model directory under it (``BASE_PATH/<name>/
  <version>/``), each serving its latest version; or one model (``--model_name NAME
  --model_base_path DIR``, DIR holding the versions);
* a model config file (``--model_config_file FILE``): TF Serving's ``ModelServerConfig`` in
  protobuf text format (``tensorflow_serving/config/model_server_config.proto``)::

      model_config_list {
        config {
          name: "taxi"
          base_path: "/models/taxi"          # holds <version>/ directories
          model_platform: "tensorflow"
          model_version_policy { specific { versions: 1 versions: 2 } }
          version_labels { key: "stable" value: 1 }
          version_labels { key: "canary" value: 2 }
        }
      }

  ``model_version_policy`` is ``latest { num_versions: N }`` (the default, N = 1),
  ``specific { versions: ... }`` or ``all {}``. A relative ``base_path`` is relative to the
  working directory, as for TF Serving. Not supported (refused with a message):
  ``custom_model_config``, a ``model_platform`` other than ``tensorflow``, bucket URIs as
  a config's ``base_path``; ``logging_config`` is ignored.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from pathlib import Path

__all__ = ["VersionPolicy", "ModelConfig", "LATEST_ONE", "MODEL_NAME_PATTERN",
           "read_config_file", "parse_config"]

MODEL_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
"""A model's name (a folder under the base path, ``/v1/models/NAME``)."""


@dataclasses.dataclass(frozen=True)
class VersionPolicy:
    """TF Serving's ``ServableVersionPolicy``: which of a model's versions to serve.

    Attributes:
        kind: ``"latest"``, ``"specific"`` or ``"all"``.
        num_versions: for ``latest``: how many of the highest versions.
        versions: for ``specific``: the versions.
    """

    kind: str = "latest"
    num_versions: int = 1
    versions: frozenset[int] = frozenset()

    def select(self, available: Iterable[int]) -> set[int]:
        """The versions to serve among those on disk."""
        available = sorted(available, reverse=True)
        if self.kind == "all":
            return set(available)
        if self.kind == "specific":
            return self.versions & set(available)
        return set(available[:self.num_versions])

    def describe(self) -> str:
        if self.kind == "specific":
            return f"specific versions {sorted(self.versions)}"
        return "all versions" if self.kind == "all" else f"the latest {self.num_versions}"


LATEST_ONE = VersionPolicy()


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """One served model: its name, the directory holding its versions, the version policy and
    the version labels (label -> version)."""

    name: str
    base_path: Path
    policy: VersionPolicy = LATEST_ONE
    labels: dict[str, int] = dataclasses.field(default_factory=dict)


def read_config_file(path: str | Path) -> list[ModelConfig]:
    """The models of a ``ModelServerConfig`` text file; ValueError naming the file and what is
    wrong (a parse error with its line, a field that is not supported)."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ValueError(f"cannot read the model config file {str(path)!r}: "
                         f"{e.strerror or e}") from None
    return parse_config(text, str(path))


def parse_config(text: str, source: str = "the model config") -> list[ModelConfig]:
    """The models of a ``ModelServerConfig`` in text format (see :func:`read_config_file`)."""
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    proto = model_server_config_pb2.ModelServerConfig()
    try:
        text_format.Parse(text, proto)
    except text_format.ParseError as e:
        raise ValueError(f"{source} is not a ModelServerConfig in text format: {e}") from None
    if proto.WhichOneof("config") == "custom_model_config":
        raise ValueError(f"{source}: custom_model_config is not supported; use "
                         "model_config_list")
    models, seen = [], set()
    for i, config in enumerate(proto.model_config_list.config):
        where = f"{source}: model_config_list.config[{i}]"
        if not config.name:
            raise ValueError(f"{where} has no name")
        if config.name in seen:
            raise ValueError(f"{where}: the model name {config.name!r} is used twice")
        seen.add(config.name)
        models.append(_model(config, where))
    if not models:
        raise ValueError(f"{source} lists no models (model_config_list {{ config {{ ... }} }})")
    return models


def _model(config, where: str) -> ModelConfig:
    if config.model_platform not in ("", "tensorflow"):
        raise ValueError(f"{where}: model_platform {config.model_platform!r} is not supported "
                         "(only 'tensorflow')")
    if not config.base_path:
        raise ValueError(f"{where} ({config.name!r}) has no base_path")
    if "://" in config.base_path:
        raise ValueError(f"{where} ({config.name!r}): base_path {config.base_path!r} is a URI; "
                         "a model config file names local directories (serve a bucket with "
                         "estflow serve gs://... or s3://...)")
    return ModelConfig(config.name, Path(config.base_path).resolve(),
                       _policy(config.model_version_policy, where),
                       dict(sorted(config.version_labels.items())))


def _policy(proto, where: str) -> VersionPolicy:
    kind = proto.WhichOneof("policy_choice")
    if kind == "all":
        return VersionPolicy("all")
    if kind == "specific":
        if not proto.specific.versions:
            raise ValueError(f"{where}: model_version_policy.specific lists no versions")
        return VersionPolicy("specific", versions=frozenset(proto.specific.versions))
    if kind == "latest" and proto.latest.num_versions < 0:
        raise ValueError(f"{where}: model_version_policy.latest.num_versions must be >= 1")
    # TF Serving: latest with num_versions unset (0) serves 1
    return VersionPolicy("latest", num_versions=max(proto.latest.num_versions, 1))

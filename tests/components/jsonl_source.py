"""A source kind that estflow does not have, declared as a user would: its dsl declaration
(what ``dsl/sources.py`` holds for the kinds estflow ships). Its reader is
:mod:`tests.components.jsonl_reader`; ``test_new_source_kind`` registers it with one row."""

from __future__ import annotations

import dataclasses

from estflow.dsl.sources import SchemaCheck
from estflow.dsl.sources import Source


@dataclasses.dataclass(frozen=True)
class JsonLinesSource(Source):
    """JSON-lines file(s): one JSON object per line, keys matched to the raw columns by name.

    Args:
        path: a file path or glob.
        max_rejected_fraction: see ``CsvSource``.
        schema_check: see ``SchemaCheck``.
    """

    path: str
    max_rejected_fraction: float = 0.01
    schema_check: SchemaCheck | None = None

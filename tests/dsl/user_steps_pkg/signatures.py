"""Functions a user might try to declare as steps (undecorated: the tests decorate them)."""

from __future__ import annotations

import estflow.dsl as ef


def star(*rows):
    pass


def artifact_default(examples: ef.Input[ef.Examples] = None):
    pass


def not_json(x: set = frozenset()):
    pass


def camel(Examples: ef.Input[ef.Examples]):  # noqa: N803 (the mistake under test)
    pass


def undefined_annotation(x: Nowhere):  # noqa: F821 (the mistake under test)
    pass

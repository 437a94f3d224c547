"""``estflow migrate`` on TF's private feature-column modules (``tensorflow.python.feature_column``),
which programs import to pick columns by class."""

from __future__ import annotations

import textwrap

from estflow.pipelines.migrate.codemod import migrate_source


def test_private_feature_column_modules_become_estflows_and_filters_select_its_columns():
    """GoogleCloudPlatform/tf-estimator-tutorials 01_Regression/02.0 (and most of that series):
    ``from tensorflow.python.feature_column import feature_column`` then
    ``isinstance(column, feature_column._NumericColumn)`` filters; TF's classes never match
    estflow's columns, so left as they were the filters would silently select nothing."""
    m = migrate_source(textwrap.dedent("""\
        import tensorflow as tf
        from tensorflow.python.feature_column import feature_column
        from tensorflow.python.feature_column import feature_column_v2 as fc2
        def dense(columns):
            return [c for c in columns if isinstance(c, feature_column._NumericColumn)]
        """))
    assert not m.unresolved
    assert "from estflow.estimator import feature_column\n" in m.source
    assert "from estflow.estimator import feature_column as fc2\n" in m.source
    assert "isinstance(c, feature_column.NumericColumn)" in m.source
    namespace: dict = {}
    exec(compile(m.source, "<migrated>", "exec"), namespace)  # noqa: S102 - the real engine
    from estflow.estimator import feature_column as fc

    columns = [fc.numeric_column("x"), fc.categorical_column_with_identity("y", 3)]
    assert namespace["dense"](columns) == columns[:1]

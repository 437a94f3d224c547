"""``estflow migrate`` on TF's private feature-column modules (``tensorflow.python.feature_column``),
which programs import to pick columns by class."""

from __future__ import annotations

import textwrap

from estflow.pipelines.migrate import migrate_source


def test_private_feature_column_module_imports_are_reported_with_the_replacement():
    """GoogleCloudPlatform/tf-estimator-tutorials 01_Regression/02.0 (and most of that series):
    ``from tensorflow.python.feature_column import feature_column`` then
    ``isinstance(column, feature_column._NumericColumn)`` filters; TF's classes never match
    estflow's columns, so the filters would silently select nothing."""
    m = migrate_source(textwrap.dedent("""\
        import tensorflow as tf
        from tensorflow.python.feature_column import feature_column
        from tensorflow.python.feature_column import feature_column_v2 as fc2
        def dense(columns):
            return [c for c in columns if isinstance(c, feature_column._NumericColumn)]
        """))
    lines = {c.line: c.message for c in m.unresolved}
    assert sorted(lines) == [2, 3]
    assert "from tensorflow.python.feature_column import feature_column: TF's private " \
           "feature-column classes" in lines[2]
    assert "import estflow.estimator.feature_column as feature_column" in lines[2]
    assert "_NumericColumn -> NumericColumn" in lines[2]
    assert "_VocabularyListCategoricalColumn -> VocabularyListColumn" in lines[2]
    assert "import estflow.estimator.feature_column as fc2" in lines[3]

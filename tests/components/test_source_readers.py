"""One lookup from a dsl source class to its reader, read by ingest and batch prediction."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import estflow.dsl as ef
from estflow.components._sources import read
from estflow.components._sources import registry
from estflow.components._sources.chunks import SourceError
from estflow.dsl.sources import source_kinds


def test_every_declarable_source_kind_has_one_reader():
    assert set(registry.READERS) == set(source_kinds())
    for source_class, reader in registry.READERS.items():
        assert (reader.files is None) != (reader.whole is None), source_class
        assert (reader.glob is None) == (reader.whole is not None), source_class


def test_a_source_kind_without_a_reader_is_named(tmp_path):
    class OtherSource:
        path = str(tmp_path)

    with pytest.raises(SourceError, match="received a OtherSource"):
        read.source_files(OtherSource(), str(tmp_path))


def test_a_directory_is_named_with_its_kinds_file_pattern(tmp_path):
    (tmp_path / "data").mkdir()
    with pytest.raises(SourceError, match=r"not a Parquet file .*'data/\*\.parquet'"):
        read.source_files(ef.ParquetSource("data"), str(tmp_path))


def test_a_parquet_reader_types_the_columns_its_schema_holds(tmp_path):
    """Batch prediction passes key columns through with the type the source's own schema
    gives them, asking the reader (a source without one: text)."""
    pq.write_table(pa.table({"id": pa.array([1], pa.int32()), "score": pa.array([0.5]),
                             "name": ["a"], "flag": [True]}), tmp_path / "a.parquet")
    files, names = [str(tmp_path / "a.parquet")], ("id", "score", "name", "flag", "absent")

    typed = registry.READERS[ef.ParquetSource].column_dtypes(files, names)

    assert typed == {"id": "int", "score": "float", "name": "string", "flag": "string"}
    assert registry.READERS[ef.ParquetSource].column_dtypes([], names) == {}
    for source_class in set(registry.READERS) - {ef.ParquetSource}:
        assert registry.READERS[source_class].column_dtypes(files, names) == {}, source_class

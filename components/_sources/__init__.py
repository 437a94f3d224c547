"""Reading a source's rows, each validated against its declared column: what ingest and batch
prediction share. :mod:`.registry` holds the one lookup from a dsl source class to its reader
(a new source kind is one reader module and one row there), which imports no reader;
:mod:`.read` reads a source through it in Beam. The readers, one module per kind:
:mod:`.csv_source` (with :mod:`.csv_blocks`, :mod:`.csv_exact`, :mod:`.csv_parse`),
:mod:`.parquet_reader`, :mod:`.tfrecord_reader`, :mod:`.bigquery_reader`; :mod:`.cells` and
:mod:`.rows` validate, :mod:`.chunks` carries rows and their line accounting, :mod:`.split`
hashes rows for the split, :mod:`.report` summarizes what was read. :mod:`.spans` selects the
spans of a source a run reads (the fingerprint step resolves them; it imports neither Beam nor
TensorFlow) and holds ``EXIT_BLOCKED``, the exit status of a run its data stopped."""

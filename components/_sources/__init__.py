"""Reading a source's rows, each validated against its declared column: what ingest and batch
prediction share. :mod:`.registry` holds the one lookup from a dsl source class to its reader
(a new source kind is one reader module and one row there); :mod:`.csv_source` (with
:mod:`.csv_blocks`, :mod:`.csv_exact`, :mod:`.csv_parse`) and :mod:`.typed_sources` are the
readers; :mod:`.cells` and :mod:`.rows` validate, :mod:`.chunks` carries rows and their line
accounting, :mod:`.split` hashes rows for the split, :mod:`.report` summarizes what was read."""

"""The ingest step's internals: sources (CSV blocks and parsing, typed sources), cell and
row validation, chunks, the train/eval split, the Beam job and its report. Entry point:
``estflow.components.ingest``."""

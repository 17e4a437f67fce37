"""Records files and rows to normalised batches: one module per format (JSON Lines, CSV, Parquet),
the lines a text reader takes out first, the one-file reader and rows given in memory. Imports the
base."""

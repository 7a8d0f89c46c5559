"""Updates: operations and their sources, deltas over an immutable base, numbered versions."""

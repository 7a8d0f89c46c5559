"""The memory-mapped store: layout, reader, writer, id hashing, feature values, text keys."""

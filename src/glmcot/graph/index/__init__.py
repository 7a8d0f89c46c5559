"""The node index behind RetrieveNode: embeddings, FAISS, the query cache, update overlays."""

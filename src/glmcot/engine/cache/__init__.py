"""Paged KV cache: the block pool, the per-request KV-cache manager and eviction policies."""

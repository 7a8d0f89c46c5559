"""Model building blocks: norm, rotary embedding, attention over the paged KV cache, MLP."""

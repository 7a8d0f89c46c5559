"""Model code (Qwen2, Qwen3, Llama), checkpoint loading, tokenizers and random model specs."""

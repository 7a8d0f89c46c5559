"""The engine loop: requests, scheduler, model runner, sampler, streaming detokenizer."""

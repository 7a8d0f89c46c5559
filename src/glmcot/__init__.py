"""glmcot: graph chain-of-thought question answering with LLM agents and a co-designed engine."""

__version__ = "0.1.0"

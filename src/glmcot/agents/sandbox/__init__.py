"""The sandbox for A-Agent snippets: grammar allowlist (policy), worker processes with limits
(worker, runtime) and the pooled executor."""

from glmcot.agents.sandbox.executor import ExecutionResult, SandboxError, SandboxExecutor, SandboxLimits
from glmcot.agents.sandbox.policy import SnippetRejected, check_snippet, extract_retrieve_texts

__all__ = ["SandboxExecutor", "SandboxLimits", "ExecutionResult", "SandboxError", "SnippetRejected", "check_snippet", "extract_retrieve_texts"]

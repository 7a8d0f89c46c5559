"""Request and response bodies (pydantic). Versioned: a breaking change bumps the version string.

`/v1/ask` is ours (``glmcot.serve.ask/1``); the `/v1/completions`, `/v1/chat/completions` and
`/v1/models` bodies follow the OpenAI API, plus extra fields for clients that know the engine
(segments with priority levels and reuse keys, session ids, request priority).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ASK_VERSION = "glmcot.serve.ask/1"
SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1   # what torch.Generator.manual_seed takes
MAX_KEY_CHARS = 1024   # a segment's reuse key: keys are kept in the engine's chunk index
MAX_STOP = 16          # stop strings per request: each is searched at every decoded token
MAX_STOP_TOKEN_IDS = 256
EVENT_VERSION = "glmcot.serve.events/1"


# --- /v1/ask -------------------------------------------------------------------------------

class AskOptions(BaseModel):
    """Per-request knobs. Unknown keys are rejected so a typo is not silently ignored."""

    model_config = ConfigDict(extra="forbid")
    include_trace: bool = Field(False, description="Return the agent's full trace in the answer.")
    max_steps: int | None = Field(None, ge=1, le=50, description="Step limit for this question.")
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(None, ge=1, description="Per LLM call output limit.")


class AskRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: str = Field(..., min_length=1, description="The question, in natural language.")
    graph: str | None = Field(None, description="Graph name; optional when the server has one.")
    method: Literal["glm", "graphcot", "graphcot-repaired"] = Field(
        "glm", description="GLM multi-agent, Graph-CoT as the original runs it, or the repaired Graph-CoT.")
    qid: str | None = Field(None, description="Question id (the scripted policy matches by it).")
    stream: bool = Field(False, description="Answer with Server-Sent Events, one per agent step.")
    options: AskOptions = Field(default_factory=AskOptions)


class AskUsage(BaseModel):
    llm_calls: int
    prompt_tokens: int
    cached_tokens: int
    output_tokens: int
    total_tokens: int


class AskTiming(BaseModel):
    latency_s: float = Field(..., description="Agent time, as the agent measured it.")
    llm_time_s: float
    retrieval_time_s: float
    queue_s: float = Field(..., description="Time spent waiting for a free slot.")
    server_s: float = Field(..., description="Arrival to response, as the server measured it.")


class AskResponse(BaseModel):
    object: Literal["glmcot.ask"] = "glmcot.ask"
    version: str = ASK_VERSION
    id: str
    qid: str | None
    question: str
    graph: str
    method: Literal["glm", "graphcot", "graphcot-repaired"]
    policy: str = Field(..., description='"model", or "scripted policy" (measures the system, '
                                         "never model accuracy).")
    answer: str | None
    failure: str | None = Field(None, description="null, or unexpected_output | "
                                "retrieval_error | code_error | step_limit | backend_error")
    failure_detail: str | None = None
    backend: str | None = Field(None, description="The LLM backend that answered.")
    calls_by_agent: dict[str, int] = Field(default_factory=dict)
    usage: AskUsage
    timing: AskTiming
    trace: list[dict[str, Any]] | None = None


class GraphInfo(BaseModel):
    name: str
    num_nodes: int | None = None
    num_edges: int | None = None
    node_types: list[str] = []


class GraphList(BaseModel):
    object: Literal["list"] = "list"
    data: list[GraphInfo]


# --- OpenAI-compatible -----------------------------------------------------------------------

class SegmentIn(BaseModel):
    """A prompt piece with its cache priority level (1 kept longest .. 4 evicted first)."""

    model_config = ConfigDict(extra="forbid")
    text: str
    level: int = Field(4, ge=1, le=4)
    key: str | None = Field(None, max_length=MAX_KEY_CHARS,
                            description="Content key for position-independent reuse.")


class StreamOptions(BaseModel):
    include_usage: bool = False


class EngineExtras(BaseModel):
    """Extra body fields (``extra_body`` in the OpenAI client) understood by the native engine."""

    top_k: int | None = Field(None, ge=-1)
    ignore_eos: bool = False
    stop_token_ids: list[int] | None = Field(None, max_length=MAX_STOP_TOKEN_IDS)
    session: str | None = Field(None, description="Session id: notebook blocks stay at level 2.")
    end_session: bool = Field(False, description="End the session when this request finishes.")
    priority: int = Field(0, description="Scheduling priority; lower is served first.")
    forced_text: str | None = Field(None, description="Force-decode exactly this text "
                                                      "(scripted policy; never model output).")


class CompletionRequest(EngineExtras):
    # extra fields are kept so the handler can refuse the unsupported ones by name
    model_config = ConfigDict(extra="allow")
    model: str | None = None
    prompt: str | list[str] | list[int] | list[list[int]] | None = None
    segments: list[SegmentIn] | None = Field(None, description="Prompt as segments "
                                                               "(replaces prompt).")
    max_tokens: int | None = Field(16, ge=0)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    n: int = Field(1, ge=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    stop: str | list[str] | None = Field(None, description=f"At most {MAX_STOP} strings.")
    seed: int | None = Field(None, ge=SEED_MIN, le=SEED_MAX, description="A 64-bit signed integer.")
    echo: bool = False
    logprobs: int | None = Field(None, ge=0, le=20, description="Log-probabilities of each "
                                 "output token and of its N likeliest alternatives.")
    presence_penalty: float | None = 0.0
    frequency_penalty: float | None = 0.0
    user: str | None = None


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    segments: list[SegmentIn] | None = Field(None, description="Message content as segments.")


class ChatCompletionRequest(EngineExtras):
    model_config = ConfigDict(extra="allow")
    model: str | None = None
    messages: list[ChatMessage] = Field(..., min_length=1)
    max_tokens: int | None = Field(None, ge=0)
    max_completion_tokens: int | None = Field(None, ge=0)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    n: int = Field(1, ge=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    stop: str | list[str] | None = Field(None, description=f"At most {MAX_STOP} strings.")
    seed: int | None = Field(None, ge=SEED_MIN, le=SEED_MAX, description="A 64-bit signed integer.")
    logprobs: bool | None = Field(None, description="Return each output token's "
                                  "log-probability.")
    top_logprobs: int | None = Field(None, ge=0, le=20, description="With logprobs: the N "
                                     "likeliest alternatives at each position.")
    presence_penalty: float | None = 0.0
    frequency_penalty: float | None = 0.0
    user: str | None = None
    add_generation_prompt: bool = True


class PromptTokensDetails(BaseModel):
    cached_tokens: int = 0


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails | None = None


class CompletionLogprobs(BaseModel):
    tokens: list[str]
    token_logprobs: list[float]
    top_logprobs: list[dict[str, float]] | None = None
    text_offset: list[int]


class CompletionChoice(BaseModel):
    index: int
    text: str
    logprobs: CompletionLogprobs | None = None
    finish_reason: str | None


class CompletionResponse(BaseModel):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    system_fingerprint: str = Field("glmcot", description='"glmcot-forced-text (scripted '
                                    'policy)" when the text was forced, never model output')
    choices: list[CompletionChoice]
    usage: Usage


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class TopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None = None


class TokenLogprobOut(TopLogprob):
    top_logprobs: list[TopLogprob] = []


class ChatLogprobs(BaseModel):
    content: list[TokenLogprobOut] | None = None
    refusal: list[TokenLogprobOut] | None = None


class ChatChoice(BaseModel):
    index: int
    message: AssistantMessage
    logprobs: ChatLogprobs | None = None
    finish_reason: str | None


class ChatCompletionResponse(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    system_fingerprint: str = "glmcot"
    choices: list[ChatChoice]
    usage: Usage


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "glmcot"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class Health(BaseModel):
    status: Literal["ok", "starting", "shutting_down", "engine_failed"]
    policy: str
    graphs: list[str]
    model: str
    detail: str | None = Field(None, description="Why the status is not ok, when known (e.g. how "
                                                 "the engine process ended).")
    graph_sources: dict[str, str] = Field(default_factory=dict, description="Graphs served from a graph "
                                          "database: 'ok', or why it cannot be reached (their questions fail "
                                          "with graph_source_error until it answers again; the server stays up).")

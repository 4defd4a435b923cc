"""Request bodies of the OpenAI-compatible endpoints, validated strictly (unknown fields are refused).

Sampling parameters and the other fields of the OpenAI API (tools, response formats, logprobs, ...) are
accepted with their JSON types checked and have no effect: the output is a deterministic filler and only
its length and timing are modelled (no tool calls are produced). `n` must be 1. Any other field is refused.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

TOKENS_LIMIT = 100_000_000  # max_tokens beyond this is a typo (the model's context refuses it anyway)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class StreamOptions(_Strict):
    include_usage: bool = False
    continuous_usage_stats: bool = False


class TextPart(_Strict):
    type: Literal["text"]
    text: str


class ChatMessage(_Strict):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    refusal: str | None = None

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(p.text for p in self.content)


class _Common(_Strict):
    model: str
    max_tokens: int | None = Field(None, ge=1, le=TOKENS_LIMIT)
    stream: bool = False
    stream_options: StreamOptions | None = None
    stop: str | list[str] | None = None
    n: int = Field(1, ge=1, le=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    seed: int | None = None
    user: str | None = None
    logprobs: bool | int | None = None
    top_logprobs: int | None = Field(None, ge=0, le=20)
    logit_bias: dict[str, float] | None = None
    metadata: dict[str, str] | None = None
    store: bool | None = None
    service_tier: str | None = None
    # vLLM extensions benchmark clients send (aiperf --extra-inputs): accepted, length is max_tokens anyway
    ignore_eos: bool | None = None
    min_tokens: int | None = Field(None, ge=0, le=TOKENS_LIMIT)

    def stops(self) -> list[str]:
        if self.stop is None:
            return []
        stops = [self.stop] if isinstance(self.stop, str) else self.stop
        return [s for s in stops if s]


class ChatRequest(_Common):
    messages: list[ChatMessage] = Field(..., min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1, le=TOKENS_LIMIT)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    response_format: dict[str, Any] | None = None
    reasoning_effort: str | None = None
    modalities: list[str] | None = None

    @model_validator(mode="after")
    def _one_limit(self) -> ChatRequest:
        if self.max_tokens is not None and self.max_completion_tokens is not None \
                and self.max_tokens != self.max_completion_tokens:
            raise ValueError("give max_tokens or max_completion_tokens, not two different limits")
        return self

    def limit(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens


class CompletionRequest(_Common):
    prompt: str | list[str] | list[int] = Field(...)
    echo: bool = False
    suffix: str | None = None
    best_of: int | None = Field(None, ge=1, le=1)

    @model_validator(mode="after")
    def _one_prompt(self) -> CompletionRequest:
        if isinstance(self.prompt, list) and self.prompt and isinstance(self.prompt[0], str) and len(self.prompt) != 1:
            raise ValueError("one prompt per request (a list of prompts is not served)")
        if self.echo:
            raise ValueError("echo is not served")
        return self

    def limit(self) -> int | None:
        return self.max_tokens

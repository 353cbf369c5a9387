"""Any OpenAI-compatible HTTP server (vLLM, llama.cpp ``llama-server``, Ollama, OpenAI).

What each call needs from the server, and which servers provide it:

- ``generate``: ``/v1/chat/completions`` (all servers).
- ``generate_json``: chat with ``response_format={"type": "json_schema", ...}`` (vLLM,
  llama-server, OpenAI); on a 4xx, ``{"type": "json_object"}`` with the schema in a system
  message (Ollama, older servers).
- ``continuation_logprobs`` and ``perplexity``: ``/v1/completions`` with ``echo=true`` and
  ``logprobs`` on the rendered prompt + continuation (vLLM, OpenAI legacy completion
  models; llama-server and Ollama do not echo prompt log-probs).
- ``next_token_logprobs``: as above, exact, all candidates in one request (vLLM); otherwise
  chat ``logprobs=true, top_logprobs=20`` (llama-server, OpenAI chat models, recent Ollama).

Scoring with ``/v1/completions`` needs the prompt rendered with the model's chat template:
pass ``chat_template`` (the Jinja template of the served model) or use a server with
``/apply-template`` (llama-server). A server that returns no log-probabilities raises a
:class:`ModelError` naming what is missing.

With the chat ``top_logprobs`` fallback, a candidate whose first token is not among the top
20 gets the 20th log-probability (an upper bound); a warning is logged.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt

from ragsieve.errors import InputError, LLMOutputError, ModelError
from ragsieve.http import HTTPStatusError, client_secrets, make_client, parse_reply, post_json, redact, stream_sse
from ragsieve.llm.base import ChatMessage, ContinuationScore, Generation, Prompt, TokenStream, as_messages
from ragsieve.telemetry import span

logger = logging.getLogger(__name__)

_TOP_LOGPROBS = 20


# ---------------------------------------------------------------------- reply schemas
# Only the fields ragsieve reads are declared; servers add many others, which are ignored.
class _Reply(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


class _Message(_Reply):
    content: str | None = None


class _Usage(_Reply):
    prompt_tokens: NonNegativeInt = 0
    completion_tokens: NonNegativeInt = 0


class _TopLogprob(_Reply):
    token: str
    logprob: float


class _TokenLogprob(_Reply):
    top_logprobs: list[_TopLogprob]


class _ChatLogprobs(_Reply):
    content: list[_TokenLogprob] = Field(min_length=1)


class _ChatChoice(_Reply):
    message: _Message
    finish_reason: str | None = None
    logprobs: _ChatLogprobs | None = None


class ChatCompletionReply(_Reply):
    """``/v1/chat/completions``: ``choices[].message.content``, ``usage``, chat log-probs."""

    choices: list[_ChatChoice] = Field(min_length=1)
    usage: _Usage | None = None


class _EchoLogprobs(_Reply):
    tokens: list[str]
    token_logprobs: list[float | None]
    text_offset: list[int]


class _CompletionChoice(_Reply):
    index: int = 0
    logprobs: _EchoLogprobs


class CompletionReply(_Reply):
    """``/v1/completions`` with ``echo`` and ``logprobs``: per-token log-probs and offsets."""

    choices: list[_CompletionChoice]


class _TemplateReply(_Reply):
    prompt: str


class OpenAICompatibleLLM:
    """An :class:`ragsieve.llm.base.LLM` that talks to an OpenAI-compatible server.

    Args:
        model: the served model name.
        base_url: server root, with or without the trailing ``/v1``.
        api_key_env: environment variable holding the API key (unset: no auth header).
        timeout_s: wall-clock limit of each attempt (connect, headers and body together).
        max_retries: retries on connection errors, timeouts, 429 and 5xx, with exponential
            backoff (``backoff_s * 2**attempt``, or the server's ``Retry-After``).
        seed: default sampling seed sent with every generation.
        chat_template: Jinja chat template of the served model, for log-prob scoring
            through ``/v1/completions``; ``None`` asks the server's ``/apply-template``.

    Example:
        >>> llm = OpenAICompatibleLLM("Qwen2.5-0.5B-Instruct", "http://127.0.0.1:8000")  # doctest: +SKIP
        >>> llm.generate("Say hi.", max_tokens=8).text  # doctest: +SKIP
        'Hi there!'
    """

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 60.0,
        max_retries: int = 3,
        seed: int = 0,
        backoff_s: float = 0.5,
        chat_template: str | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.seed = seed
        self.backoff_s = backoff_s
        self.chat_template = chat_template
        self._client: Any = None
        self._json_schema_supported: bool | None = None
        self._echo_supported: bool | None = None

    @property
    def model_name(self) -> str:
        return self.model

    @property
    def root_url(self) -> str:
        url = self.base_url.rstrip("/")
        return url[: -len("/v1")] if url.endswith("/v1") else url

    # ------------------------------------------------------------------ transport
    def warm_up(self) -> None:
        """Create the HTTP client (the server is contacted on the first request); idempotent."""
        if self._client is not None:
            return
        self._client = make_client(self.root_url, self.api_key_env, self.timeout_s)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        """POST JSON with retries. 4xx other than 429 raise :class:`HTTPStatusError`."""
        self.warm_up()
        with span("ragsieve.llm.http", model=self.model, path=path):
            return self._post_untraced(path, payload)

    def _post_untraced(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        return post_json(
            self._client,
            path,
            payload,
            service="LLM server",
            max_retries=self.max_retries,
            backoff_s=self.backoff_s,
            timeout_s=self.timeout_s,
        )

    def _redact(self, text: str) -> str:
        return redact(text, client_secrets(self._client))

    def _post_checked(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._post(path, payload)
        except HTTPStatusError as exc:
            raise ModelError(
                f"LLM server at {self.root_url}{path} rejected the request ({exc}); "
                f"check that model {self.model!r} is served and the parameters are supported"
            ) from exc

    # ------------------------------------------------------------------ generation
    def _chat(self, prompt: Prompt, **params: Any) -> dict[str, Any]:
        payload = {"model": self.model, "messages": [dict(m) for m in as_messages(prompt)], **params}
        return self._post("/v1/chat/completions", payload)

    def _generation(self, data: dict[str, Any]) -> Generation:
        reply = parse_reply(ChatCompletionReply, data, service=f"LLM server at {self.root_url}/v1/chat/completions")
        choice = reply.choices[0]
        usage = reply.usage or _Usage()
        return Generation(
            text=choice.message.content or "",
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            finish_reason="length" if choice.finish_reason == "length" else "stop",
        )

    def generate(
        self,
        prompt: Prompt,
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
    ) -> Generation:
        params: dict[str, Any] = {
            "max_tokens": max_tokens,
            "temperature": temperature,
            "seed": self.seed if seed is None else seed,
        }
        if stop:
            params["stop"] = list(stop)
        try:
            data = self._chat(prompt, **params)
        except HTTPStatusError as exc:
            raise ModelError(
                f"LLM server at {self.root_url} rejected a chat completion ({exc}); "
                f"check that model {self.model!r} is served"
            ) from exc
        return self._generation(data)

    def generate_stream(
        self,
        prompt: Prompt,
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
    ) -> TokenStream:
        """:meth:`generate` with ``stream: true``: the reply's text as the server sends it
        (server-sent events through :func:`ragsieve.http.stream_sse`, bounded by ``timeout_s``
        and cancelled with the job). Token counts come from the stream's ``usage`` when the
        server sends one, else the completion counts the pieces."""
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in as_messages(prompt)],
            "max_tokens": max_tokens,
            "temperature": temperature,
            "seed": self.seed if seed is None else seed,
            "stream": True,
        }
        if stop:
            payload["stop"] = list(stop)
        self.warm_up()
        service = f"LLM server at {self.root_url}/v1/chat/completions"
        pieces: list[str] = []
        finish: str | None = None
        usage: dict[str, Any] = {}
        with span("ragsieve.llm.generate_stream", model=self.model):
            try:
                for event in stream_sse(
                    self._client, "/v1/chat/completions", payload, service="LLM server", timeout_s=self.timeout_s
                ):
                    if isinstance(event.get("usage"), dict):
                        usage = event["usage"]
                    choices = event.get("choices") or []
                    if not choices or not isinstance(choices[0], dict):
                        continue
                    # "message" when the server ignored stream: true and sent the whole reply
                    delta = choices[0].get("delta") or choices[0].get("message") or {}
                    finish = choices[0].get("finish_reason") or finish
                    piece = delta.get("content") if isinstance(delta, dict) else None
                    if isinstance(piece, str) and piece:
                        pieces.append(piece)
                        yield piece
            except HTTPStatusError as exc:
                raise ModelError(
                    f"{service} rejected a streamed chat completion ({exc}); check that model {self.model!r} "
                    "is served and the server supports stream: true"
                ) from exc
        return Generation(
            text="".join(pieces),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or len(pieces)),
            finish_reason="length" if finish == "length" else "stop",
        )

    def generate_json(self, prompt: Prompt, schema: dict[str, Any], *, max_tokens: int = 256) -> dict[str, Any]:
        """``response_format=json_schema`` (strict); on a 4xx, ``json_object`` plus the schema in
        a system message. The result is validated; one retry; then :class:`LLMOutputError`."""
        import jsonschema

        messages = as_messages(prompt)
        problem = ""
        for attempt in range(2):
            params: dict[str, Any] = {
                "max_tokens": max_tokens * (attempt + 1),
                "temperature": 0.0,
                "seed": self.seed + attempt,
            }
            data = None
            if self._json_schema_supported is not False:
                fmt = {
                    "type": "json_schema",
                    "json_schema": {"name": "output", "schema": schema, "strict": True},
                }
                try:
                    data = self._chat(messages, response_format=fmt, **params)
                    self._json_schema_supported = True
                except (HTTPStatusError, ModelError) as exc:
                    # Some servers (llama_cpp.server) answer an unsupported response format with a 5xx,
                    # so a server fault here is also read as "json_schema not supported".
                    logger.info("server rejected json_schema (%s); falling back to json_object", exc)
                    self._json_schema_supported = False
            if data is None:
                hint = ChatMessage(
                    role="system",
                    content="Reply with one JSON object only, matching this JSON schema: " + json.dumps(schema),
                )
                try:
                    data = self._chat(
                        [hint, *messages],
                        response_format={"type": "json_object"},
                        **params,
                    )
                except (HTTPStatusError, ModelError) as exc:
                    raise ModelError(
                        f"LLM server at {self.root_url} supports neither json_schema nor json_object "
                        f"response formats ({exc}); schema-constrained JSON output is needed by the task "
                        "classifier's llm-json mode, the LLM retrieval evaluator and the chain-of-evidence LLM "
                        "features: use the llama-cpp backend or a server with structured output (vLLM)"
                    ) from exc
            text = self._generation(data).text
            try:
                value = json.loads(text)
                jsonschema.validate(value, schema)
            except (json.JSONDecodeError, jsonschema.ValidationError) as exc:
                problem = self._redact(f"{type(exc).__name__}: {str(exc).splitlines()[0]} (output {text[:200]!r})")
                continue
            if isinstance(value, dict):
                return value
            problem = f"expected a JSON object, got {type(value).__name__}"
        raise LLMOutputError(
            f"{self.model} did not return JSON matching the schema after 2 attempts: {problem}; "
            "raise max_tokens or simplify the schema"
        )

    # ------------------------------------------------------------------ scoring
    def render(self, prompt: Prompt) -> str:
        """The prompt text with the model's chat template and assistant prefix applied."""
        text = self._try_render(prompt)
        if text is None:
            raise ModelError(
                f"cannot render the chat template for log-prob scoring: {self.root_url} has no "
                "/apply-template; pass chat_template (the served model's Jinja template) to "
                "OpenAICompatibleLLM"
            )
        return text

    def _try_render(self, prompt: Prompt) -> str | None:
        messages = as_messages(prompt)
        if self.chat_template is not None:
            from ragsieve.llm.llama_cpp import _TemplateRenderer

            return _TemplateRenderer(self.chat_template, "", "")(messages)[0]
        try:
            data = self._post("/apply-template", {"messages": [dict(m) for m in messages]})
        except HTTPStatusError:
            return None
        return parse_reply(_TemplateReply, data, service=f"LLM server at {self.root_url}/apply-template").prompt

    def _echo_logprobs(self, texts: Sequence[str], start: int) -> list[tuple[float, int, float | None]]:
        """Sum, count and first value of the token log-probs of ``text[start:]`` for each text,
        in one ``/v1/completions`` request (a list of prompts) with ``echo=true``."""
        payload = {
            "model": self.model,
            "prompt": list(texts),
            "echo": True,
            "logprobs": 1,
            "max_tokens": 1,
            "temperature": 0.0,
        }
        try:
            data = self._post("/v1/completions", payload)
        except (HTTPStatusError, ModelError) as exc:
            # A rejection (4xx) or a server fault on every retry (llama_cpp.server answers a list of
            # prompts with a 5xx) both mean the feature is missing there.
            self._echo_supported = False
            raise ModelError(
                f"LLM server at {self.root_url} cannot score prompt tokens: /v1/completions with a list of "
                f"prompts, echo and logprobs failed ({exc}); prompt log-probabilities are needed by "
                "continuation scoring (multi-token labels in classify and the knowledge filters, the task "
                "classifier's log-prob mode, the sieve's closed-book confidence probe): use a vLLM server "
                "or the llama-cpp backend"
            ) from exc
        try:
            reply = parse_reply(CompletionReply, data, service=f"LLM server at {self.root_url}/v1/completions")
        except ModelError as exc:
            self._echo_supported = False
            raise ModelError(
                f"LLM server at {self.root_url} returned no prompt log-probabilities from /v1/completions "
                f"(echo+logprobs unsupported: {exc}); use a vLLM server or the llama-cpp backend"
            ) from None
        choices = sorted(reply.choices, key=lambda c: c.index)
        columns = [(c.logprobs.tokens, c.logprobs.token_logprobs, c.logprobs.text_offset) for c in choices]
        if len(columns) != len(texts):
            raise ModelError(
                f"LLM server at {self.root_url} answered {len(columns)} choices for {len(texts)} prompts; "
                "check that it supports a list of prompts in /v1/completions"
            )
        self._echo_supported = True
        out = []
        for text, (tokens, values, offsets) in zip(texts, columns, strict=True):
            total, count, first = 0.0, 0, None
            end = len(text)
            for _tok, value, off in zip(tokens, values, offsets, strict=False):
                if off < start or off >= end:
                    continue  # prompt tokens, and the one generated token past the echoed text
                if value is None:
                    raise ModelError(f"LLM server at {self.root_url} returned a null log-prob inside the continuation")
                if first is None:
                    first = float(value)
                total += float(value)
                count += 1
            out.append((total, count, first))
        return out

    def continuation_logprobs(self, prompt: Prompt, continuations: Sequence[str]) -> list[ContinuationScore]:
        """Needs ``/v1/completions`` with ``echo`` (vLLM). Tokens are those of the server's
        tokenisation of prompt+continuation whose character offset falls in the continuation."""
        rendered = self.render(prompt)
        nonempty = [c for c in continuations if c]
        scored = iter(self._echo_logprobs([rendered + c for c in nonempty], len(rendered)) if nonempty else [])
        out = []
        for cont in continuations:
            if not cont:
                out.append(ContinuationScore(0.0, 0))
                continue
            total, count, _ = next(scored)
            out.append(ContinuationScore(total, count))
        return out

    def next_token_logprobs(self, prompt: Prompt, candidates: Sequence[str]) -> list[float]:
        if any(not c for c in candidates):
            raise InputError("next_token_logprobs got an empty candidate; pass non-empty label words")
        rendered = self._try_render(prompt) if self._echo_supported is not False else None
        if rendered is not None:
            try:
                firsts = [r[2] for r in self._echo_logprobs([rendered + c for c in candidates], len(rendered))]
                return [float(f) if f is not None else -math.inf for f in firsts]
            except ModelError as exc:
                if self._echo_supported is not False:
                    raise  # not a capability problem (e.g. the server is down)
                logger.info("echo scoring unavailable (%s); using chat top_logprobs", exc)
        return self._chat_top_logprobs(prompt, candidates)

    def _chat_top_logprobs(self, prompt: Prompt, candidates: Sequence[str]) -> list[float]:
        try:
            data = self._chat(prompt, max_tokens=1, temperature=0.0, logprobs=True, top_logprobs=_TOP_LOGPROBS)
        except HTTPStatusError as exc:
            raise ModelError(
                f"LLM server at {self.root_url} cannot return log-probabilities ({exc}); "
                "use a server with logprobs support (vLLM, llama-server) or the llama-cpp backend"
            ) from exc
        reply = parse_reply(ChatCompletionReply, data, service=f"LLM server at {self.root_url}/v1/chat/completions")
        logprobs = reply.choices[0].logprobs
        if logprobs is None:
            raise ModelError(
                f"LLM server at {self.root_url} returned no log-probabilities for chat completions; "
                "use a server with logprobs support (vLLM, llama-server) or the llama-cpp backend"
            )
        table = {t.token: t.logprob for t in logprobs.content[0].top_logprobs}
        if not table:
            raise ModelError(f"LLM server at {self.root_url} returned an empty top_logprobs list")
        floor = min(table.values())
        out = []
        for cand in candidates:
            # the candidate's first token is the longest listed token that starts it
            matches = [tok for tok in table if tok and cand.startswith(tok)]
            if matches:
                out.append(table[max(matches, key=len)])
            else:
                logger.warning("candidate %r not in the server's top-%d; using %.3f", cand, len(table), floor)
                out.append(floor)
        return out

    def perplexity(self, prompt: Prompt, answer: str) -> float:
        if not answer:
            raise InputError("perplexity of an empty answer is undefined; pass a non-empty answer")
        (score,) = self.continuation_logprobs(prompt, [answer])
        if score.n_tokens == 0:
            raise ModelError(f"LLM server at {self.root_url} returned no tokens for the answer")
        return math.exp(-score.mean_logprob)

    def count_tokens(self, text: str) -> int:
        """Server-side ``/tokenize`` (vLLM, llama-server); else an estimate of 4 characters per
        token, logged once."""
        try:
            data = self._post(
                "/tokenize",
                {"model": self.model, "prompt": text, "content": text, "add_special_tokens": False},
            )
            tokens = data.get("tokens")
            if isinstance(tokens, list):
                return len(tokens)
            if isinstance(data.get("count"), int):
                return int(data["count"])
        except HTTPStatusError:
            pass
        logger.info("%s has no /tokenize; estimating tokens as characters / 4", self.root_url)
        return max(1, math.ceil(len(text) / 4)) if text else 0

    # ------------------------------------------------------------------ persistence
    def to_dict(self) -> dict[str, Any]:
        return {
            "type": f"{type(self).__module__}.{type(self).__qualname__}",
            "init_parameters": {
                "model": self.model,
                "base_url": self.base_url,
                "api_key_env": self.api_key_env,
                "timeout_s": self.timeout_s,
                "max_retries": self.max_retries,
                "seed": self.seed,
                "backoff_s": self.backoff_s,
                "chat_template": self.chat_template,
            },
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OpenAICompatibleLLM:
        return cls(**data.get("init_parameters", {}))

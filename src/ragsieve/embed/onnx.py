"""Sentence embeddings through ONNX Runtime: the same vectors as the torch backend, faster on a CPU.

The bundled model ships as safetensors only, so the first warm-up writes it as an ONNX graph
once and caches the file. BERT-family models (the bundled MiniLM among them) are written straight
from their weights with ``onnx`` and numpy (:mod:`ragsieve.embed.bert_onnx`), so the core install
needs no torch; other architectures go through torch's exporter (``pip install 'ragsieve[torch]'``).
Tokenisation uses the model folder's ``tokenizer.json`` through the ``tokenizers`` library and
mean pooling follows the folder's ``1_Pooling`` config, so the vectors match
sentence-transformers' to float precision.

``precision="int8"`` (``embedder.precision``, the default) runs a copy of that graph with its
weights quantized to int8 by onnxruntime's dynamic quantization, made once from the fp32 graph and
cached beside it; its vectors differ slightly, so the embedder's ``model_name`` carries the
precision, and an embedder whose precision is the default follows the precision of the index it
opens (an index built with fp32 keeps being searched with fp32).

The graph has a second output, the last layer's token vectors, from which
:meth:`OnnxEmbedder.embed_with_sentences` pools each sentence of a passage in the passage's own
forward pass (the mean of the sentence's tokens, found by the tokenizer's character offsets).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import warnings
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, get_args

import numpy as np

from ragsieve.embed.base import EmbeddingCache, embed_with_cache, l2_normalize
from ragsieve.embed.bert_onnx import TOKEN_OUTPUT, export_bert_to_onnx, is_supported
from ragsieve.embed.local import BUNDLED_MODEL_NAME, local_model_dir
from ragsieve.errors import InputError, ModelError
from ragsieve.io import atomic_path, atomic_write_json, fsync_dir, user_cache_dir
from ragsieve.options import EmbedderPrecision

logger = logging.getLogger(__name__)

# Bumped when the exported graph changes, so stale cached files are not reused (2: the token
# vectors are an output too).
EXPORT_VERSION = 2

# The cached optimised graph: a folder (format 2) holding the graph, its weights in a file of their
# own and the check its loader runs (format 1 was one .onnx file with the weights inside).
OPTIMIZED_FORMAT = 2
OPTIMIZED_GRAPH = "model.onnx"
OPTIMIZED_WEIGHTS = "weights.bin"
OPTIMIZED_CHECK = "check.json"
# What a cached graph must embed as it did when it was written, to within PROBE_TOLERANCE per
# component (the raw pooled vector, before normalisation).
PROBE_TEXT = "Apollo 11 landed on the Moon in July 1969; graphene is one layer of carbon atoms."
PROBE_TOLERANCE = 1e-4
PROVIDERS = ["CPUExecutionProvider"]
# How the int8 graph is quantized (onnxruntime.quantization.quantize_dynamic): one scale per output
# channel of each weight matrix, chosen for keeping the vectors closest to the fp32 graph's
# (on ten short and long texts like tests/embed/test_onnx_int8.py's, the lowest cosine to the fp32
# vector was 0.90 with one scale per tensor, 0.989 per channel).
INT8_PER_CHANNEL = True


def quantize_graph(source: Path, target: Path) -> None:
    """Write ``source``'s graph to ``target`` with its weights dynamically quantized to int8
    (written aside, then renamed into place: a crash never leaves half a graph)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with atomic_path(target, suffix=".onnx") as tmp:
        quantize_dynamic(source, tmp, weight_type=QuantType.QInt8, per_channel=INT8_PER_CHANNEL)
    logger.info("quantized %s to int8 at %s", source, target)


def default_onnx_dir() -> Path:
    """Where exported graphs are cached: ``$XDG_CACHE_HOME/ragsieve/onnx`` (``~/.cache`` by default)."""
    return user_cache_dir() / "onnx"


def model_fingerprint(model_dir: Path) -> str:
    """A short hash of the files that define the graph (weights and configs, not the tokenizer)."""
    digest = hashlib.sha256(f"export-v{EXPORT_VERSION}".encode())
    for name in ("config.json", "model.safetensors", "pytorch_model.bin"):
        path = model_dir / name
        if path.is_file():
            stat = path.stat()
            digest.update(f"{name}:{stat.st_size}".encode())
            with path.open("rb") as handle:
                # Head and tail of the weights identify them without hashing every byte.
                digest.update(handle.read(1 << 20))
                handle.seek(max(0, stat.st_size - (1 << 20)))
                digest.update(handle.read(1 << 20))
    return digest.hexdigest()[:16]


def read_sentence_transformers_settings(model_dir: Path) -> tuple[int, str]:
    """(max sequence length, pooling mode) from a sentence-transformers model folder."""
    max_len = 512
    bert_cfg = model_dir / "sentence_bert_config.json"
    if bert_cfg.is_file():
        max_len = int(json.loads(bert_cfg.read_text(encoding="utf-8")).get("max_seq_length", max_len))
    pooling = "mean"
    for pool_cfg in sorted(model_dir.glob("*_Pooling/config.json")):
        cfg = json.loads(pool_cfg.read_text(encoding="utf-8"))
        modes = [k for k, v in cfg.items() if k.startswith("pooling_mode_") and v]
        if modes:
            pooling = modes[0].removeprefix("pooling_mode_").removesuffix("_tokens").removesuffix("_token")
    return max_len, pooling


def export_to_onnx(model_dir: Path, target: Path) -> None:
    """Export a transformers encoder plus mean pooling to ``target`` (atomically)."""
    from ragsieve.extras import require

    purpose = f"exporting {model_dir.name} to ONNX (only BERT models are written without torch)"
    torch = require("torch", "torch", purpose)
    AutoModel = require("transformers", "torch", purpose).AutoModel  # noqa: N806
    try:
        import onnx  # noqa: F401  # torch's exporter needs it and fails with a vaguer message
    except ImportError as exc:
        raise ModelError("exporting the embedder to ONNX needs the onnx package: pip install onnx") from exc

    module_base: Any = torch.nn.Module

    class MeanPooledEncoder(module_base):
        def __init__(self, encoder: Any) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9), hidden

    # Eager attention exports to plain matmuls; the SDPA path traces a Python branch on the mask.
    encoder = AutoModel.from_pretrained(str(model_dir), local_files_only=True, attn_implementation="eager")
    wrapped = MeanPooledEncoder(encoder.eval())
    dummy = torch.ones(2, 8, dtype=torch.long)
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(target) as tmp, torch.no_grad(), warnings.catch_warnings():
        # The tracer warns about branches on shapes that are constant for an encoder.
        warnings.simplefilter("ignore")
        torch.onnx.export(
            wrapped,
            (dummy, dummy, torch.zeros_like(dummy)),
            str(tmp),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["embedding", TOKEN_OUTPUT],
            dynamic_axes={
                "input_ids": {0: "batch", 1: "sequence"},
                "attention_mask": {0: "batch", 1: "sequence"},
                "token_type_ids": {0: "batch", 1: "sequence"},
                "embedding": {0: "batch"},
                TOKEN_OUTPUT: {0: "batch", 1: "sequence"},
            },
            opset_version=17,
            dynamo=False,
        )
    logger.info("exported %s to %s", model_dir, target)


# Texts shorter than this many characters are batched as if they had it: tiny texts gain nothing
# from batches of their own.
MIN_BATCH_CHARS = 64


def length_batches(lengths: list[int], batch_size: int, spread: float = 1.15) -> list[np.ndarray]:
    """Row indices in batches of at most ``batch_size``, shortest texts first, a batch's longest
    text at most ``spread`` times its shortest (lengths below :data:`MIN_BATCH_CHARS` count as it).

    Every text in a batch is padded to the batch's longest, so mixing one-line sentences with
    256-token passages (the judge embeds both) multiplies the work; sorting alone does not prevent
    it when the lengths are spread out (measured on the demo index under load: the ~50 sentences of
    each of three questions' candidates embedded about 1.9x faster than sorted into batches of 64)."""
    order = np.argsort(lengths, kind="stable")
    batches: list[np.ndarray] = []
    start = 0
    for i in range(1, len(order) + 1):
        if i == len(order) or i - start >= batch_size or (
            max(lengths[order[i]], MIN_BATCH_CHARS) > spread * max(lengths[order[start]], MIN_BATCH_CHARS)
        ):
            batches.append(order[start:i])
            start = i
    return batches


def _probe_vector(session: Any, ids: list[int]) -> np.ndarray:
    """What ``session`` gives for one text of token ``ids`` (unpadded: every token attended)."""
    feeds = {
        "input_ids": np.array([ids], dtype=np.int64),
        "attention_mask": np.ones((1, len(ids)), dtype=np.int64),
        "token_type_ids": np.zeros((1, len(ids)), dtype=np.int64),
    }
    names = {i.name for i in session.get_inputs()}
    pooled = session.get_outputs()[0].name
    return np.asarray(session.run([pooled], {k: v for k, v in feeds.items() if k in names})[0], dtype=np.float32)[0]


def pool_token_spans(
    tokens: np.ndarray, offsets: Sequence[tuple[int, int]], real: np.ndarray, spans: Sequence[tuple[int, int]]
) -> np.ndarray:
    """The mean of the token vectors of each character span ``(start, end)`` of a text, one row per
    span: ``tokens`` (sequence, dim) are the text's token vectors, ``offsets`` each token's
    character span (as the tokenizer gives it) and ``real`` which tokens are the text's own (not
    padding or special tokens). A span that no token covers to its end (cut off by the model's
    maximum length) or that holds no token gets a row of NaN."""
    dim = tokens.shape[-1]
    out = np.full((len(spans), dim), np.nan, dtype=np.float32)
    idx = np.flatnonzero(real)
    if idx.size == 0 or not spans:
        return out
    starts = np.array([offsets[int(i)][0] for i in idx], dtype=np.int64)
    ends = np.array([offsets[int(i)][1] for i in idx], dtype=np.int64)
    sums = np.zeros((idx.size + 1, dim), dtype=np.float64)
    np.cumsum(tokens[idx], axis=0, dtype=np.float64, out=sums[1:])
    last_end = int(ends.max())
    for j, (start, end) in enumerate(spans):
        if end > last_end:
            continue  # the text was cut before this span ends
        first = int(np.searchsorted(ends, start, side="right"))  # first token ending after the start
        stop = int(np.searchsorted(starts, end, side="left"))  # tokens starting before the end
        if stop > first:
            out[j] = (sums[stop] - sums[first]) / (stop - first)
    return out


class OnnxEmbedder:
    """Sentence embeddings from a local sentence-transformers folder, run with ONNX Runtime.

    Gives the same vectors as :class:`SentenceTransformerEmbedder` (same ``model_name``, so
    indexes and caches built with either work with the other) at a lower CPU cost.

    Example:
        >>> emb = OnnxEmbedder()            # bundled all-MiniLM-L6-v2; exports once on first use
        >>> emb.warm_up()
        >>> emb.embed(["graphene is a carbon sheet"]).shape
        (1, 384)
    """

    def __init__(
        self,
        model: str | None = None,
        batch_size: int = 64,  # embedder.batch_size's default, as the other embedders'
        threads: int | None = None,
        normalize: bool = True,
        cache_dir: str | None = None,
        onnx_dir: str | None = None,
        precision: EmbedderPrecision = "int8",
        follow_index_precision: bool = False,
    ) -> None:
        if precision not in get_args(EmbedderPrecision):
            raise ModelError(
                f"embedder precision {precision!r} is not one of {', '.join(get_args(EmbedderPrecision))}"
            )
        self.model = model
        self.batch_size = batch_size
        self.threads = threads
        self.normalize = normalize
        self.cache_dir = cache_dir
        self.onnx_dir = onnx_dir
        self.precision = precision
        # whether opening an index built with another precision of the same model switches to
        # that precision (the user left embedder.precision at its default) instead of refusing it
        self.follow_index_precision = follow_index_precision
        self._session: Any = None
        self._pooled_output = "embedding"
        self._token_output: str | None = None
        self._tokenizer: Any = None
        self._input_names: list[str] = []
        self._cache = EmbeddingCache(Path(cache_dir) / "embeddings.sqlite") if cache_dir else None
        self._dim = 0
        self._loading: Future[None] | None = None  # the load running (or done), whichever thread runs it
        self._load_lock = threading.Lock()

    @property
    def model_name(self) -> str:
        """The name an index records: the model's, with the precision when it is not fp32 (int8
        vectors differ slightly, so an index built with one precision is not searched with the other)."""
        name = self.model or BUNDLED_MODEL_NAME
        return name if self.precision == "fp32" else f"{name}@{self.precision}"

    @property
    def dim(self) -> int:
        self.warm_up()
        return self._dim

    @property
    def pools_sentences(self) -> bool:
        """Whether :meth:`embed_with_sentences` can pool sentences from a passage's own pass (the
        graph has the token vectors as an output; loads the model)."""
        self.warm_up()
        return self._token_output is not None

    def for_index(self, index_model_name: str) -> OnnxEmbedder:
        """The embedder to search an index whose recorded embedder is ``index_model_name``
        (``model@int8``, or the bare name for fp32): this one, or, when this one's precision was
        left at its default (``follow_index_precision``) and the index was built with the same
        model at another precision, a copy of it with that precision (this one is left as it
        is: it may be shared). Anything else is left for the caller's name check."""
        name, _, tag = index_model_name.partition("@")
        precision = tag or "fp32"
        if (
            not self.follow_index_precision
            or precision == self.precision
            or name != (self.model or BUNDLED_MODEL_NAME)
            or precision not in get_args(EmbedderPrecision)
        ):
            return self
        logger.info("the index was built with the %s embedder: searching it with %s, not %s", precision, precision,
                    self.precision)  # fmt: skip
        settings = {k: v for k, v in self.to_dict().items() if k not in ("backend", "precision")}
        # bound to that index's precision (its to_dict() names it)
        return OnnxEmbedder(**settings, precision=precision)  # type: ignore[arg-type]

    def onnx_path(self, model_dir: Path, precision: EmbedderPrecision | None = None) -> Path:
        """The cached graph of ``precision`` (the embedder's own by default); the fp32 one is the
        exported graph, any other is made from it and named with its precision."""
        base = Path(self.onnx_dir) if self.onnx_dir else default_onnx_dir()
        precision = precision or self.precision
        tag = "" if precision == "fp32" else f"-{precision}"
        return base / f"{model_dir.name}-{model_fingerprint(model_dir)}{tag}.onnx"

    def start_warm_up(self) -> None:
        """Begin loading the model on a worker thread and return at once; :meth:`warm_up` (and
        so the first :meth:`embed`) waits for that load and raises its error. ONNX Runtime builds
        a session largely outside the GIL, so an index opening meanwhile (its partitions, the
        stages) costs a cold question little beyond the load itself."""
        loading, mine = self._current_load()
        if mine:
            # not a daemon: a process that exits while ONNX Runtime is still building the
            # session waits for it, instead of being killed inside it (an abort, exit code 134)
            threading.Thread(target=self._run_load, args=(loading,), name="ragsieve-embedder-load").start()

    def warm_up(self) -> None:
        """Load the model now, or wait for the load another thread started (one load at a time:
        threads that warm up together share it, and a failed load is tried again next time)."""
        if self._session is not None:
            return
        loading, mine = self._current_load()
        if mine:
            self._run_load(loading)
        try:
            loading.result()
        finally:
            with self._load_lock:
                if self._loading is loading and self._session is None:
                    self._loading = None  # failed: the next call loads again

    def _current_load(self) -> tuple[Future[None], bool]:
        """The load in progress (or done), and whether the caller has just claimed it to run."""
        with self._load_lock:
            if self._loading is not None:
                return self._loading, False
            loading: Future[None] = Future()
            if self._session is not None:
                loading.set_result(None)
                return loading, False
            self._loading = loading
            return loading, True

    def _run_load(self, loading: Future[None]) -> None:
        try:
            self._load()
        except BaseException as exc:  # handed to whoever waits in warm_up
            loading.set_exception(exc)
        else:
            loading.set_result(None)

    def _load(self) -> None:
        if self._session is not None:
            return
        model_dir = local_model_dir(self.model)
        if not (model_dir / "config.json").is_file() or not (model_dir / "tokenizer.json").is_file():
            raise ModelError(
                f"{model_dir} is not a sentence-transformers model folder with config.json and tokenizer.json; "
                "ragsieve never downloads models, so pass a complete local folder"
            )
        max_len, pooling = read_sentence_transformers_settings(model_dir)
        if pooling != "mean":
            raise ModelError(
                f"the ONNX embedder supports mean pooling only, but {model_dir} uses {pooling!r} pooling; "
                "use embedder.backend = 'sentence-transformers' for this model"
            )
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ModelError("the ONNX embedder needs onnxruntime and tokenizers: pip install onnxruntime") from exc
        fp32_path = self.onnx_path(model_dir, "fp32")
        path = self.onnx_path(model_dir)
        if not path.is_file() and not fp32_path.is_file():
            logger.info("exporting %s to ONNX (once; cached at %s)", self.model_name, fp32_path)
            if is_supported(model_dir):
                export_bert_to_onnx(model_dir, fp32_path)
            else:
                export_to_onnx(model_dir, fp32_path)
        if not path.is_file():
            logger.info("quantizing %s to %s (once; cached at %s)", self.model_name, self.precision, path)
            quantize_graph(fp32_path, path)
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tokenizer.enable_truncation(max_len)
        tokenizer.enable_padding()
        session = self._create_session(ort, path, list(tokenizer.encode(PROBE_TEXT).ids))
        self._input_names = [i.name for i in session.get_inputs()]
        outputs = [o.name for o in session.get_outputs()]
        self._pooled_output = outputs[0]
        self._token_output = TOKEN_OUTPUT if TOKEN_OUTPUT in outputs else None
        self._tokenizer = tokenizer
        self._dim = int(session.get_outputs()[0].shape[-1])
        self._session = session  # last: a set session means a ready embedder (another thread may look)
        logger.info("loaded ONNX embedder %s (%s)", self.model_name, path.name)

    def _options(self, ort: Any) -> Any:
        options = ort.SessionOptions()
        options.inter_op_num_threads = 1
        if self.threads:
            options.intra_op_num_threads = self.threads
        options.log_severity_level = 3
        # Spinning worker threads would keep cores busy after each call and slow the LLM that
        # runs next in the same process.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return options

    @staticmethod
    def optimized_dir(path: Path, ort_version: str) -> Path:
        """Where the graph optimised by this onnxruntime version is cached, beside the graph: a
        folder with the graph, its weights as a separate file and a check vector
        (:data:`OPTIMIZED_FORMAT`)."""
        return path.with_name(f"{path.stem}.ort-{ort_version}.optimized-v{OPTIMIZED_FORMAT}")

    @staticmethod
    def legacy_optimized_path(path: Path, ort_version: str) -> Path:
        """The one-file optimised graph earlier versions cached (its weights inside the graph,
        which onnxruntime parses far more slowly than a separate weights file); removed once the
        folder replaces it."""
        return path.with_name(f"{path.stem}.ort-{ort_version}.optimized.onnx")

    def _create_session(self, ort: Any, path: Path, probe_ids: list[int]) -> Any:
        """A session on the cached optimised graph (its fusions done once, so a cold process skips
        them), written on first use from ``path``. The cache is used only when the vector it gives
        for ``probe_ids`` is the one recorded when it was written: a damaged or stale cache is
        rebuilt, never trusted."""
        cached = self.optimized_dir(path, ort.__version__)
        if cached.is_dir():
            try:
                return self._open_cached(ort, cached, probe_ids)
            except Exception as exc:  # damaged, stale or incomplete: rebuilt from the source graph
                logger.warning("cached optimised graph %s is unusable (%s); rebuilding it", cached, exc)
                shutil.rmtree(cached, ignore_errors=True)
        try:
            self._write_cache(ort, path, cached, probe_ids)
        except OSError as exc:  # a read-only cache: run the source graph without saving
            logger.info("could not cache the optimised graph at %s (%s)", cached, exc)
            return self._open_source(ort, path)
        self.legacy_optimized_path(path, ort.__version__).unlink(missing_ok=True)
        try:
            return self._open_cached(ort, cached, probe_ids)
        except Exception as exc:  # the file system lost what was just written: do without it
            logger.warning("the optimised graph just cached at %s does not load (%s)", cached, exc)
            return self._open_source(ort, path)

    def _open_source(self, ort: Any, path: Path, save_to: Path | None = None) -> Any:
        """A session on the source graph, optimised now (and saved under ``save_to``, a folder)."""
        options = self._options(ort)
        # Extended (not "all") optimisations are the ones onnxruntime documents as safe to save:
        # no layout transforms tied to this CPU.
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        if save_to is not None:
            options.optimized_model_filepath = str(save_to / OPTIMIZED_GRAPH)
            # The weights in a file of their own (a path relative to the graph's folder):
            # onnxruntime reads them without parsing them as protobuf, about 3x faster to load.
            options.add_session_config_entry(
                "session.optimized_model_external_initializers_file_name", OPTIMIZED_WEIGHTS
            )
            options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
        try:
            return ort.InferenceSession(str(path), options, providers=PROVIDERS)
        except Exception as exc:  # onnxruntime raises its own exception types for a damaged file
            raise ModelError(f"could not load the ONNX graph {path}: {exc}; delete it to re-export") from exc

    def _write_cache(self, ort: Any, path: Path, cached: Path, probe_ids: list[int]) -> None:
        """Optimise ``path`` into the folder ``cached`` (written aside, then renamed into place:
        a reader sees all of it or none), with the vector the graph gives for ``probe_ids``.

        onnxruntime maps the weights file into the sessions that load it, so a cache is never
        rewritten in place: a damaged one is removed (a running process keeps its mapping) and
        written anew under the same name."""
        cached.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{cached.name}.", suffix=".tmp", dir=cached.parent))
        try:
            session = self._open_source(ort, path, save_to=staging)
            if not (staging / OPTIMIZED_GRAPH).is_file():
                raise OSError(f"onnxruntime wrote no optimised graph in {staging}")
            record = {
                "format": OPTIMIZED_FORMAT,
                "probe_ids": probe_ids,
                "probe": [float(x) for x in _probe_vector(session, probe_ids)],
                "sizes": {name: (staging / name).stat().st_size for name in (OPTIMIZED_GRAPH, OPTIMIZED_WEIGHTS)},
            }
            atomic_write_json(staging / OPTIMIZED_CHECK, record)
            try:
                os.rename(staging, cached)
            except OSError:
                if not cached.is_dir():
                    raise
                # another process (or thread) cached the same graph first: theirs is used
            else:
                fsync_dir(cached.parent)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _open_cached(self, ort: Any, cached: Path, probe_ids: list[int]) -> Any:
        """A session on the cached folder, after checking it is complete and gives the recorded
        vector for ``probe_ids`` (a ``ValueError`` otherwise). The check runs every layer of the
        encoder on the probe's tokens (and warms the session up for the first real batch); it
        cannot see a damaged embedding row of a token the probe lacks."""
        record = json.loads((cached / OPTIMIZED_CHECK).read_text(encoding="utf-8"))
        if record.get("format") != OPTIMIZED_FORMAT or record.get("probe_ids") != probe_ids:
            raise ValueError("it was written for another format or check")
        for name, size in dict(record["sizes"]).items():
            if (cached / name).stat().st_size != size:
                raise ValueError(f"{name} is not the size it was written with")
        options = self._options(ort)
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(str(cached / OPTIMIZED_GRAPH), options, providers=PROVIDERS)
        expected = np.asarray(record["probe"], dtype=np.float32)
        got = _probe_vector(session, probe_ids)
        # The same graph on the same onnxruntime gives the same bits; the tolerance admits a
        # cache folder shared by CPUs whose kernels round differently (differences near 1e-6).
        if got.shape != expected.shape or not np.allclose(got, expected, rtol=0.0, atol=PROBE_TOLERANCE):
            raise ValueError("it no longer gives the vector it was written with")
        return session

    def _tokenize(self, texts: list[str]) -> dict[str, np.ndarray]:
        return self._feeds(self._tokenizer.encode_batch(texts))

    def _feeds(self, encodings: list[Any]) -> dict[str, np.ndarray]:
        feeds = {
            "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
        }
        return {k: feeds[k] for k in self._input_names}

    def _infer(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        return np.asarray(self._session.run([self._pooled_output], feeds)[0], dtype=np.float32)

    def _run(self, texts: list[str]) -> np.ndarray:
        return self._infer(self._tokenize(texts))

    def _encoded_batches(self, texts: list[str]) -> Iterator[tuple[np.ndarray, list[Any]]]:
        """``(rows, encodings)`` for each of :func:`length_batches`' batches of ``texts``; the next
        batch is tokenised in a thread while the caller runs this one (both release the GIL, so
        the tokeniser's work hides behind inference)."""
        batches = length_batches([len(t) for t in texts], self.batch_size)
        if len(batches) == 1:
            yield batches[0], self._tokenizer.encode_batch([texts[i] for i in batches[0]])
            return
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragsieve-tokenize") as pool:
            pending = pool.submit(self._tokenizer.encode_batch, [texts[i] for i in batches[0]])
            for n, rows in enumerate(batches):
                encodings = pending.result()
                if n + 1 < len(batches):
                    pending = pool.submit(self._tokenizer.encode_batch, [texts[i] for i in batches[n + 1]])
                yield rows, encodings

    def _encode(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self._dim), dtype=np.float32)
        for rows, encodings in self._encoded_batches(texts):
            out[rows] = self._infer(self._feeds(encodings))
        return l2_normalize(out) if self.normalize else out

    def embed_with_sentences(
        self, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """The vectors of ``texts`` (as :meth:`embed` gives them) and, from the same forward pass,
        one vector per character span of ``spans[i]`` (a sentence of text i): the mean of the
        last layer's vectors of the span's tokens, normalised like the text's. A span the model
        did not see to its end (the text is longer than its maximum length) gets a row of NaN,
        for the caller to embed on its own. The content-hash cache is not used.

        Example:
            >>> emb = OnnxEmbedder()                                        # doctest: +SKIP
            >>> text = "Graphene is one layer of carbon. It conducts heat."
            >>> vectors, sentences = emb.embed_with_sentences([text], [[(0, 32), (33, 51)]])  # doctest: +SKIP
            >>> sentences[0].shape                                          # doctest: +SKIP
            (2, 384)
        """
        self.warm_up()
        texts = list(texts)
        if len(spans) != len(texts):
            raise InputError(f"{len(spans)} span lists for {len(texts)} texts")
        if self._token_output is None:
            raise ModelError(
                f"the ONNX graph of {self.model_name} has no token output to pool sentences from; "
                "delete the cached graph under the ONNX cache folder so that it is exported again"
            )
        out = np.empty((len(texts), self._dim), dtype=np.float32)
        pooled: list[np.ndarray] = [np.empty((0, self._dim), dtype=np.float32)] * len(texts)
        for rows, encodings in self._encoded_batches(texts):
            vectors, tokens = self._session.run([self._pooled_output, self._token_output], self._feeds(encodings))
            out[rows] = vectors
            for b, i in enumerate(rows):
                enc = encodings[b]
                real = (np.asarray(enc.attention_mask) == 1) & (np.asarray(enc.special_tokens_mask) == 0)
                pooled[i] = pool_token_spans(np.asarray(tokens[b], dtype=np.float32), enc.offsets, real, spans[i])
        if self.normalize:
            out = l2_normalize(out)
            pooled = [l2_normalize(p) if len(p) else p for p in pooled]
        return out, pooled

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.warm_up()
        return embed_with_cache(texts, self.model_name, self._encode, self._cache, self._dim)

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": "onnx",
            "model": self.model,
            "batch_size": self.batch_size,
            "threads": self.threads,
            "normalize": self.normalize,
            "cache_dir": self.cache_dir,
            "onnx_dir": self.onnx_dir,
            # None (as in embedder.precision): the default, following an opened index's precision
            "precision": None if self.follow_index_precision else self.precision,
        }

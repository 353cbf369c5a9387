"""`ragsieve ask` with the defaults trains nothing and imports no heavy library.

The CLI runs in a subprocess (its own ``sys.modules``) on an index built by the default
``ragsieve ingest``, against a fake OpenAI-compatible server on loopback; a wrapper runs the
CLI's ``main`` and writes the names of every module imported by the end to a file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from tests.helpers import HashEmbedder, copy_corpus
from tests.test_cli_lean import chat_server  # noqa: F401 - the fake LLM server fixture

from ragsieve.cancel import CancelToken, GenerationCancelledError, cancel_scope
from ragsieve.config import validate_config
from ragsieve.errors import IndexStoreError, ModelError
from ragsieve.index import Index
from ragsieve.llm.base import ContinuationScore, Generation
from ragsieve.sieve.pipeline import Pipeline
from ragsieve.verify import LexicalEmbeddingJudge

# Neither may load on the default query path: the profile found them costing 20+ s of imports.
FORBIDDEN = ("sklearn", "skops", "torch", "sentence_transformers", "transformers")

WRAPPER = """
import sys
from pathlib import Path

out = Path(sys.argv[1])
sys.argv = ["ragsieve", *sys.argv[2:]]
from ragsieve.tasks import classifier as _classifier
_fit = _classifier.TfidfTaskClassifier.fit_sklearn

def _refuse_training(*args, **kwargs):
    raise RuntimeError("the task router was trained during ask")

_classifier.TfidfTaskClassifier.fit_sklearn = _refuse_training
from ragsieve.cli import main
try:
    main()
finally:
    out.write_text("\\n".join(sorted(sys.modules)), encoding="utf-8")
"""


def run_cli(tmp: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    modules = tmp / "modules.txt"
    modules.unlink(missing_ok=True)
    env = {**os.environ, "RAGSIEVE_INDEX": "", "COLUMNS": "100", "NO_COLOR": "1"}
    result = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(modules), *args],
        capture_output=True, text=True, timeout=600, env=env, stdin=subprocess.DEVNULL,
    )
    return result, set(modules.read_text(encoding="utf-8").split()) if modules.is_file() else set()


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in FORBIDDEN)


@pytest.fixture(scope="module")
def default_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cold")
    result, _ = run_cli(root, "ingest", str(copy_corpus(root)), "--index", str(root / "idx"), "--json")
    assert result.returncode == 0, result.stderr
    # the default ingest of a two-folder corpus trains the domain router once, as arrays
    assert (root / "idx" / "router" / "router.npz").is_file()
    return root / "idx"


@pytest.mark.parametrize("pipeline", ["sieve", "plain"])
def test_ask_loads_no_heavy_library_and_trains_nothing(default_index, chat_server, tmp_path, pipeline):  # noqa: F811
    url, _ = chat_server
    result, modules = run_cli(
        tmp_path, "ask", "What is the Moon?", "--index", str(default_index), "--pipeline", pipeline,
        "--llm-url", url, "--model", "fake", "--json",
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["question"] == "What is the Moon?"
    assert modules, "the wrapper wrote no module list"
    assert "ragsieve.cli" in modules
    assert heavy(modules) == [], f"ask imported {heavy(modules)[:10]}"


def test_help_imports_no_heavy_library(tmp_path):
    result, modules = run_cli(tmp_path, "--help")
    assert result.returncode == 0, result.stderr
    assert heavy(modules) == []


def test_help_builds_no_config_model():
    # the choices come from ragsieve.options; pydantic and the config models load when a command runs
    code = (
        "import sys\nfrom ragsieve.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('pydantic', 'ragsieve.config', 'ragsieve.options') if m in sys.modules))"
    )
    env = {**os.environ, "RAGSIEVE_INDEX": "", "COLUMNS": "100", "NO_COLOR": "1"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "['ragsieve.options']"


def test_ask_without_a_calibrated_threshold_loads_no_scipy_stats(default_index, chat_server, tmp_path):  # noqa: F811
    url, _ = chat_server
    result, modules = run_cli(
        tmp_path, "ask", "What is the Moon?", "--index", str(default_index), "--pipeline", "sieve",
        "--llm-url", url, "--model", "fake", "--json",
    )
    assert result.returncode == 0, result.stderr
    assert "ragsieve.calibrate" not in modules and "scipy.stats" not in modules


# ---------------------------------------------------------------- the model loads while the checks run
# In process, with fakes whose slowness is a sleep (no CPU), so the comparison holds on a loaded
# machine: each figure is measured against the fakes' own sleeps, not against wall-clock goals.
SLEEP_S = 1.5


class SlowLoadingLLM:
    """An LLM whose warm_up takes ``load_s`` (or raises ``error``); records when it ran."""

    model_name = "slow-loading"

    def __init__(self, load_s: float = SLEEP_S, error: Exception | None = None) -> None:
        self.load_s = load_s
        self.error = error
        self.release = threading.Event()  # set to end a load early
        self.load_span: tuple[float, float] | None = None
        self.generated_at: list[float] = []
        self.warm_ups = 0

    def warm_up(self) -> None:
        self.warm_ups += 1
        if self.load_span is not None:
            return
        start = time.monotonic()
        self.release.wait(self.load_s)
        if self.error is not None:
            raise self.error
        self.load_span = (start, time.monotonic())

    def generate(self, prompt, *, max_tokens=256, temperature=0.0, stop=None, seed=None) -> Generation:
        assert self.load_span is not None, "generate ran before the model finished loading"
        self.generated_at.append(time.monotonic())
        return Generation("The Apollo 11 crew landed on the Moon in July 1969 [1].", 100, 12, "stop")

    def generate_json(self, prompt, schema, *, max_tokens=256):
        raise NotImplementedError

    def continuation_logprobs(self, prompt, continuations):
        return [ContinuationScore(-0.1, 1) for _ in continuations]

    def next_token_logprobs(self, prompt, candidates):
        return [-0.1 for _ in candidates]

    def count_tokens(self, text):
        return len(text.split())


class SlowJudge:
    """A relevance judge that takes ``score_s`` per call (a slow check); records when it ran."""

    name = "slow"
    upper = 0.6
    lower = 0.3

    def __init__(self, score_s: float = SLEEP_S) -> None:
        self.score_s = score_s
        self.spans: list[tuple[float, float]] = []

    def warm_up(self) -> None:
        pass

    def score(self, question, passages):
        start = time.monotonic()
        time.sleep(self.score_s)
        self.spans.append((start, time.monotonic()))
        return [0.9 if "moon" in p.lower() else 0.1 for p in passages]


@pytest.fixture(scope="module")
def hash_index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    root = tmp_path_factory.mktemp("overlap")
    return Index.build(copy_corpus(root), root / "idx", embedder=HashEmbedder())


def sieve_pipeline(index: Index, llm: SlowLoadingLLM, judge: SlowJudge) -> Pipeline:
    # the default sieve stages (ScopeCoE with rule features included); need always retrieves
    cfg = validate_config({"sieve": {"need": "always", "route": "all"}})
    return Pipeline(cfg, index=index, llm=llm, judge=judge, claim_judge=LexicalEmbeddingJudge(embedding_weight=0.0))


def timed_ask(pipe: Pipeline) -> float:
    start = time.monotonic()
    pipe.ask("When did Apollo 11 land on the Moon?")
    return time.monotonic() - start


def test_the_model_load_overlaps_the_checks(hash_index):
    # the same question with a model that loads at once: what the checks cost on their own now
    baseline = timed_ask(sieve_pipeline(hash_index, SlowLoadingLLM(load_s=0.0), SlowJudge()))
    llm, judge = SlowLoadingLLM(), SlowJudge()
    total = timed_ask(sieve_pipeline(hash_index, llm, judge))
    assert llm.load_span is not None and judge.spans and llm.generated_at
    (load_start, load_end), (judge_start, judge_end) = llm.load_span, judge.spans[0]
    # the judge ran while the model loaded, and generation waited for the load
    overlap = min(load_end, judge_end) - max(load_start, judge_start)
    assert overlap > 0.5 * SLEEP_S, f"the load and the judge overlapped only {overlap:.2f} s"
    assert llm.generated_at[0] >= load_end
    # loaded one after the other, the slow model would add its whole sleep to the total
    assert total - baseline < 0.5 * SLEEP_S, f"cold {total:.2f} s vs {baseline:.2f} s with an instant load"


def test_a_failed_load_surfaces_at_the_first_stage_that_uses_the_model(hash_index):
    judge = SlowJudge(score_s=0.0)
    failing = SlowLoadingLLM(load_s=0.2, error=ModelError("GGUF model file x is missing"))
    pipe = sieve_pipeline(hash_index, failing, judge)
    with pytest.raises(ModelError, match="^GGUF model file x is missing$"):
        pipe.ask("When did Apollo 11 land on the Moon?")
    assert judge.spans, "the checks should have run while the model loaded"
    # the next question loads again: a failed load is not kept
    with pytest.raises(ModelError, match="^GGUF model file x is missing$"):
        pipe.ask("When did Apollo 11 land on the Moon?")
    assert failing.warm_ups == 2
    pipe.llm = SlowLoadingLLM(load_s=0.0)
    assert pipe.ask("When did Apollo 11 land on the Moon?").text


def test_waiting_for_the_model_can_be_cancelled(hash_index):
    llm = SlowLoadingLLM(load_s=30.0)
    pipe = sieve_pipeline(hash_index, llm, SlowJudge(score_s=0.0))
    token = CancelToken()
    timer = threading.Timer(0.3, token.cancel, args=("the client left",))
    start = time.monotonic()
    timer.start()
    try:
        with cancel_scope(token), pytest.raises(GenerationCancelledError, match="the client left"):
            pipe.ask("When did Apollo 11 land on the Moon?")
    finally:
        timer.cancel()
        llm.release.set()  # end the fake load
    assert time.monotonic() - start < 10.0


def test_warm_up_still_returns_with_the_model_loaded(hash_index):
    llm = SlowLoadingLLM(load_s=0.3)
    pipe = sieve_pipeline(hash_index, llm, SlowJudge(score_s=0.0))
    pipe.warm_up()
    assert llm.load_span is not None
    pipe.warm_up()
    assert llm.warm_ups == 1, "a loaded model is not loaded again"


def test_a_failed_load_raises_from_warm_up(hash_index):
    pipe = sieve_pipeline(hash_index, SlowLoadingLLM(load_s=0.0, error=ModelError("no weights")), SlowJudge(0.0))
    with pytest.raises(ModelError, match="no weights"):
        pipe.warm_up()


# ---------------------------------------------------------------- sentence vectors stored at ingest
class CountingEmbedder:
    """The configured embedder, recording every text it is asked to embed."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.normalize = getattr(inner, "normalize", True)
        self.texts: list[str] = []

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def warm_up(self) -> None:
        self.inner.warm_up()

    def embed(self, texts):
        self.texts.extend(texts)
        return self.inner.embed(texts)

    def to_dict(self):
        return self.inner.to_dict()


@pytest.mark.slow
def test_ask_embeds_no_passage_sentence_on_an_index_ingest_wrote(default_index):
    from ragsieve.config import EmbedderConfig
    from ragsieve.embed import load_embedder
    from ragsieve.index.sentences import passage_sentences

    embedder = CountingEmbedder(load_embedder(EmbedderConfig()))
    index = Index.open(default_index, embedder=embedder)
    cfg = validate_config({"sieve": {"need": "always", "route": "all"}})
    answer = Pipeline(cfg, index=index, llm=SlowLoadingLLM(load_s=0.0)).ask("When did Apollo 11 land on the Moon?")
    assert answer.trace.timings_ms.get("judge") is not None  # the relevance judge ran over the candidates
    sentences = {s for c in index.chunks for s in passage_sentences(c.text)} | {c.text for c in index.chunks}
    embedded = set(embedder.texts)
    assert "When did Apollo 11 land on the Moon?" in embedded
    assert not embedded & sentences, f"embedded at question time: {sorted(embedded & sentences)[:3]}"


# ---------------------------------------------------------------- the embedder loads while the index opens
class SlowLoadingEmbedder(HashEmbedder):
    """A hash embedder whose model takes ``load_s`` to load, on a worker thread when asked to
    start early (as :class:`ragsieve.embed.OnnxEmbedder` does)."""

    def __init__(self, load_s: float = SLEEP_S, dim: int = 64) -> None:
        super().__init__(dim=dim)
        self.load_s = load_s
        self.loaded = threading.Event()
        self.started_at: float | None = None
        self._thread: threading.Thread | None = None

    def start_warm_up(self) -> None:
        self.started_at = time.monotonic()
        self._thread = threading.Thread(target=self._load)
        self._thread.start()

    def _load(self) -> None:
        time.sleep(self.load_s)
        self.loaded.set()

    def warm_up(self) -> None:
        if self._thread is None:
            self._load()
        self.loaded.wait()

    def embed(self, texts):
        self.warm_up()
        return super().embed(texts)


def test_the_embedder_loads_while_the_index_opens(hash_index):
    embedder = SlowLoadingEmbedder()
    start = time.monotonic()
    index = Index.open(hash_index.dir, embedder=embedder)
    opened = time.monotonic()
    assert embedder.started_at is not None and not embedder.loaded.is_set(), "open waited for the model"
    assert opened - start < 0.5 * SLEEP_S
    index.warm_up()  # partitions loaded meanwhile; now the model is waited for
    assert embedder.loaded.is_set()
    expected = [h.chunk.id for h in hash_index.search("the Moon", k=3)]
    assert [h.chunk.id for h in index.search("the Moon", k=3)] == expected


def test_a_pipeline_warming_up_for_a_question_does_not_wait_for_the_embedder(hash_index, monkeypatch):
    # what `ask` does: the stages before the first embedding run while the embedder loads
    from ragsieve import embed

    embedder = SlowLoadingEmbedder()
    monkeypatch.setattr(embed, "load_embedder", lambda config: embedder)
    cfg = validate_config({"index_dir": str(hash_index.dir), "stages": {"need": {"mode": "always"}}})
    pipe = Pipeline(cfg, llm=SlowLoadingLLM(load_s=0.0), claim_judge=LexicalEmbeddingJudge(embedding_weight=0.0))
    start = time.monotonic()
    pipe.warm_up(wait_for_llm=False)
    assert time.monotonic() - start < 0.5 * SLEEP_S and not embedder.loaded.is_set(), "warm_up waited for it"
    expected = [h.chunk.id for h in hash_index.search("the Moon", k=3)]
    assert [h.chunk.id for h in pipe.index.search("the Moon", k=3)] == expected  # the search waits
    assert embedder.loaded.is_set()
    # warming up to answer later (the default) still waits
    embedder = SlowLoadingEmbedder()
    Pipeline(cfg, llm=SlowLoadingLLM(load_s=0.0)).warm_up()
    assert embedder.loaded.is_set()


def test_an_embedder_of_another_dimension_is_refused_once_loaded(hash_index):
    index = Index.open(hash_index.dir, embedder=SlowLoadingEmbedder(load_s=0.05, dim=32))
    with pytest.raises(IndexStoreError, match="64-dimensional vectors .* gives 32"):
        index.search("the Moon", k=3)
    with pytest.raises(IndexStoreError, match="64-dimensional vectors .* gives 32"):
        Index.open(hash_index.dir, embedder=SlowLoadingEmbedder(load_s=0.05, dim=32)).warm_up()


def test_the_default_checks_warming_up_do_not_wait_for_the_embedder(hash_index, monkeypatch):
    # the verifier's default claim judge embeds with the index's embedder: its warm-up starts
    # nothing new and waits for nothing, the first embedding waits
    from ragsieve import embed

    embedder = SlowLoadingEmbedder()
    monkeypatch.setattr(embed, "load_embedder", lambda config: embedder)
    cfg = validate_config({"index_dir": str(hash_index.dir), "stages": {"need": {"mode": "always"}}})
    pipe = Pipeline(cfg, llm=SlowLoadingLLM(load_s=0.0))
    start = time.monotonic()
    pipe.warm_up(wait_for_llm=False)
    assert time.monotonic() - start < 0.5 * SLEEP_S and not embedder.loaded.is_set(), "a stage waited for it"
    assert pipe.claim_judge is not None and pipe.claim_judge.embedder is not None
    answer = pipe.ask("When did Apollo 11 land on the Moon?")
    assert embedder.loaded.is_set() and answer.trace.timings_ms.get("verify") is not None

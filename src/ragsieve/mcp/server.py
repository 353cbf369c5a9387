"""The MCP server: ragsieve's ``ask`` and ``search`` as tools with typed inputs and structured
output, over stdio or streamable HTTP.

The tools run on the service's :class:`~ragsieve.serve.engine.Engine` (one open index, reopened
when it is re-ingested; the LLM loaded once, on the first ``ask``), and an answer is laid out
by :func:`ragsieve.present.present_answer`, the view the terminal and the service show: its
outcome, sentences with their sources, the checks' reasons in words and any withdrawn draft.

Over HTTP the app sits behind the guards of ``ragsieve serve``: the API key (``Authorization:
Bearer KEY`` or ``X-API-Key: KEY``; 401 without it), the Host allow-list against DNS rebinding,
the request-body limit and the security headers; and no answer names a file-system path.

Example:
    >>> from ragsieve.config import PipelineConfig
    >>> from ragsieve.serve.engine import Engine
    >>> server = build_server(Engine(PipelineConfig(index_dir="demo-index")))  # doctest: +SKIP
    >>> server.run()  # stdio                                               # doctest: +SKIP
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ragsieve.extras import require

# The mcp extra's implementation: without it, importing this module names the extra to install.
require("mcp", "mcp", "the ragsieve MCP server")

import anyio.to_thread  # noqa: E402 - after the extra's check
from mcp.server.mcpserver import Context, MCPServer  # noqa: E402
from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402
from mcp.server.transport_security import TransportSecuritySettings  # noqa: E402
from mcp.types import CallToolResult, TextContent, ToolAnnotations  # noqa: E402

from ragsieve.citations import Citation, citation_uri  # noqa: E402
from ragsieve.errors import RagsieveError  # noqa: E402
from ragsieve.index.access import Access  # noqa: E402
from ragsieve.serve.engine import Engine, without_paths  # noqa: E402
from ragsieve.serve.guard import API_KEY_MISSING  # noqa: E402
from ragsieve.serve.keys import KeyRing, record_access, request_access  # noqa: E402
from ragsieve.serve.schemas import MAX_K, MAX_TEXT_CHARS  # noqa: E402

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

logger = logging.getLogger(__name__)

SERVER_NAME = "ragsieve"
MCP_PATH = "/mcp"
DEFAULT_DEADLINE_S = 120.0
INSTRUCTIONS = (
    "ragsieve answers questions from one document index and checks each answer against its evidence. "
    "Use `ask` for a checked answer: when its outcome is 'abstained' the index does not support an answer, "
    "so say so rather than answer from memory; cite the sources it returns. Use `search` to read the "
    "passages themselves."
)


# ---------------------------------------------------------------------- structured output
class Source(BaseModel):
    """A passage the answer cites: ``[n]`` in the answer text is ``n`` here."""

    n: int = Field(description="The number the answer's [n] markers use.")
    id: str = Field(description="The chunk id, 'path:position'.")
    citation: str = Field(description="Where the passage is, as a person reads it: path#page=N, path#heading, a URL.")
    title: str = ""
    path: str | None = Field(None, description="The file, relative to the ingested folder.")
    page: int | None = Field(None, description="1-based PDF page.")
    heading: str | None = None
    url: str | None = Field(None, description="The record's own address, when it has one.")
    uri: str | None = Field(
        None, description="A link that opens the source: its http(s) address, or a file:// URI (stdio only)."
    )
    cited: bool = Field(True, description="Whether an answer sentence cites it (else it was evidence only).")


class Sentence(BaseModel):
    """One answer sentence, the sources it cites and, when the verifier ran, whether they support it."""

    text: str
    sources: list[int] = Field(default_factory=list, description="The [n] of each source it cites.")
    supported: bool | None = None
    support: float | None = Field(None, description="0-1.")


class Withdrawn(BaseModel):
    """Text the checks withdrew, and why."""

    text: str
    reason: str = Field(description="Why, in words.")
    replaced_by: str = Field(description="abstention, regenerated answer, or the answer without these sentences.")


class Reason(BaseModel):
    """A check's reason: one plain sentence, and for programs the check's code, kind and numbers."""

    model_config = ConfigDict(extra="allow")
    about: str = Field("", description="Where it applies: abstention, caveat or withdrawn draft.")
    kind: str = Field("", description="The kind of reason (e.g. low_confidence, unsupported).")
    code: str = Field("", description="The check's own reason, as the trace records it.")
    text: str = Field(description="The reason in words.")
    numbers: dict[str, float] = Field(default_factory=dict)
    parts: list[dict[str, Any]] = Field(default_factory=list, description="The reasons it combines.")


class AskResult(BaseModel):
    """The checked answer."""

    question: str
    outcome: Literal["answered", "abstained"]
    text: str = Field(description="The answer with [n] citation markers (the abstention message when abstained).")
    abstain_reason: str | None = Field(None, description="Why it abstained, in words.")
    caveat: str | None = Field(None, description="Why the answer is not fully confirmed, in words.")
    citation_note: str | None = Field(None, description="Set when a sentence cites no source.")
    confidence: float | None = Field(None, description="0-1.")
    sentences: list[Sentence] = Field(default_factory=list)
    sources: list[Source] = Field(default_factory=list)
    reasons: list[Reason] = Field(
        default_factory=list,
        description="Every reason shown (abstention, caveat, withdrawn drafts), in words and as codes.",
    )
    withdrawn: list[Withdrawn] = Field(default_factory=list)
    pipeline: str | None = None
    index_generation: str | None = None


class Hit(BaseModel):
    """One ranked passage."""

    rank: int
    id: str
    text: str
    source: str = Field(description="The document's source (its host or file).")
    citation: str
    title: str = ""
    partition: str = Field("", description="The index partition (domain) it is in.")
    score: float = Field(description="0-1: the retrieval score divided by the top hit's.")
    raw_score: float = Field(description="The retriever's own score.")
    path: str | None = None
    page: int | None = None
    heading: str | None = None
    url: str | None = None
    uri: str | None = None


class SearchResult(BaseModel):
    """Ranked passages for a query."""

    query: str
    hits: list[Hit]
    note: str | None = Field(None, description="Why nothing was found, when a hint exists.")
    index_generation: str | None = None


# ---------------------------------------------------------------------- the tools
@dataclass
class Tools:
    """The tools' work, on the engine. ``local``: the client runs on this machine (stdio), so
    answers may carry ``file://`` links; over HTTP no answer names a file-system path."""

    engine: Engine
    local: bool = True
    deadline_s: float = DEFAULT_DEADLINE_S

    def __post_init__(self) -> None:
        # One question at a time reaches the LLM (the engine's pipelines are not reentrant).
        self._llm_lock = threading.Lock()

    def _message(self, exc: Exception) -> str:
        return str(exc) if self.local else without_paths(str(exc))

    def _root(self) -> Any:
        if not self.local:
            return None
        try:
            return getattr(self.engine.snapshot().index, "corpus_root", None)
        except Exception:  # a link is a convenience: no link rather than a failed call
            return None

    def _uri(self, hit: dict[str, Any], root: Any) -> str | None:
        uri = citation_uri(Citation.from_hit(hit), root)
        return uri if self.local or (uri and not uri.startswith("file:")) else None

    def check_partition(self, partition: str | None) -> None:
        """An unknown partition, in the tool's own terms (before the engine names its ``route``)."""
        if partition is None or partition in ("all", "auto"):
            return
        known = _partitions(self.engine)
        if partition not in known:
            raise ToolError(
                f"unknown partition {partition!r}; this index has {', '.join(known) or 'no partitions'}: "
                "pass one of them, 'auto' (the router picks) or 'all', or leave partition out"
            )

    def ask(
        self, question: str, k: int | None, partition: str | None, access: Access | None = None
    ) -> dict[str, Any]:
        from ragsieve.cancel import time_limit
        from ragsieve.http import question_deadline

        self.check_partition(partition)
        fix = "ask a narrower question, or start the server with a larger --deadline"
        with self._llm_lock, time_limit(self.deadline_s, "the question", fix), question_deadline(self.deadline_s):
            return self.engine.ask(question, k=k, route=partition, access=access)

    def ask_result(self, answer: dict[str, Any]) -> AskResult:
        view = answer.get("presentation") or {}
        evidence = answer.get("evidence") or []
        root = self._root()
        sources = []
        for src in view.get("sources") or []:
            n = int(src["n"])
            hit = evidence[n - 1] if 0 < n <= len(evidence) else {}
            fields = {key: src.get(key) for key in ("n", "id", "citation", "title", "path", "page", "heading", "url")}
            sources.append(Source(**{k: v for k, v in fields.items() if v is not None},
                                  uri=self._uri(hit, root) if hit else None, cited=bool(src.get("cited", True))))
        strip = (lambda text: text) if self.local else without_paths
        return AskResult(
            question=str(answer.get("question") or view.get("question") or ""),
            outcome="abstained" if view.get("outcome") == "abstained" else "answered",
            text=str(view.get("text") or answer.get("answer") or ""),
            abstain_reason=view.get("abstain_reason"),
            caveat=view.get("caveat"),
            citation_note=view.get("citation_note"),
            confidence=view.get("confidence"),
            sentences=[
                Sentence(text=s["text"], sources=list(s.get("sources") or []), supported=s.get("supported"),
                         support=s.get("support"))
                for s in view.get("sentences") or []
            ],
            sources=sources,
            reasons=[
                Reason(**{**r, "text": strip(str(r.get("text", "")))}) for r in view.get("reasons") or []
            ],
            withdrawn=[
                Withdrawn(text=d["text"], reason=strip(d["reason"]), replaced_by=d["replaced_by"])
                for d in view.get("withdrawn") or []
            ],
            pipeline=answer.get("pipeline"),
            index_generation=answer.get("index_generation"),
        )

    def search(self, query: str, k: int, partition: str | None, access: Access | None = None) -> SearchResult:
        from ragsieve.present import relative_scores

        self.check_partition(partition)
        out = self.engine.search(query, k=k, route=partition, access=access)
        hits = out.get("hits") or []
        root = self._root()
        scaled = relative_scores(hits)
        return SearchResult(
            query=query,
            hits=[
                Hit(
                    rank=int(h.get("rank", i + 1)), id=str(h["id"]), text=str(h.get("text") or ""),
                    source=str(h.get("source") or ""), citation=str(h.get("citation") or h["id"]),
                    title=str(h.get("title") or ""), partition=str(h.get("domain") or ""),
                    score=round(scaled[i], 6), raw_score=float(h.get("score") or 0.0),
                    path=h.get("path"), page=h.get("page"), heading=_heading(h.get("heading")), url=h.get("url"),
                    uri=self._uri(h, root),
                )
                for i, h in enumerate(hits)
            ],
            note=out.get("note"),
            index_generation=out.get("index_generation"),
        )


def _heading(value: Any) -> str | None:
    if isinstance(value, list):
        return " > ".join(str(v) for v in value if v) or None
    return str(value) if value else None


def answer_text(result: AskResult) -> str:
    """The answer as the assistant's model reads it: the text, why it abstained or is not fully
    confirmed, what was withdrawn, then the cited sources as numbered lines."""
    text = result.text.strip()
    said = " ".join(text.split()).lower()
    if result.outcome == "abstained" and result.abstain_reason and (
        result.abstain_reason.strip().rstrip(".").lower() not in said
    ):
        text += f"\n\n(abstained: {result.abstain_reason})"
    if result.caveat:
        text += f"\n\n(caveat: {result.caveat})"
    if result.citation_note:
        text += f"\n\n({result.citation_note})"
    for draft in result.withdrawn:
        text += f"\n\n(withdrawn draft: {draft.reason} The draft was: {draft.text})"
    lines = [f"[{s.n}] {s.citation}" + (f" <{s.uri}>" if s.uri else "") for s in result.sources if s.cited]
    if lines:
        text += "\n\nSources:\n" + "\n".join(lines)
    return text


def search_text(result: SearchResult) -> str:
    """The hits as the assistant's model reads them."""
    if not result.hits:
        return "No passage matched." + (f" {result.note}" if result.note else "")
    return "\n\n".join(f"{h.rank}. {h.citation} (score {h.score:.2f})\n{h.text}" for h in result.hits)


QuestionArg = Annotated[
    str, Field(min_length=1, max_length=MAX_TEXT_CHARS, description="The question, in plain words.")
]
QueryArg = Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS, description="What to search for.")]
PartitionArg = Annotated[
    str | None,
    Field(
        max_length=200,
        description="Which index partition (domain) to search: one partition's name, 'auto' (the router picks) "
        "or 'all'. Default: the server's configuration.",
    ),
]
AskK = Annotated[
    int | None, Field(ge=1, le=MAX_K, description="Evidence passages to answer from. Default: the server's.")
]
SearchK = Annotated[int, Field(ge=1, le=MAX_K, description="How many passages to return.")]


def build_server(engine: Engine, *, local: bool = True, deadline_s: float = DEFAULT_DEADLINE_S) -> MCPServer[Any]:
    """An MCP server with the ``ask``, ``search`` and ``audit`` tools over ``engine``.

    ``local`` (stdio): answers may carry ``file://`` links to the sources; set it False for a
    server reached over the network, whose answers then name no file-system path."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("ragsieve")
    except PackageNotFoundError:  # a source checkout that is not installed
        release = ""
    tools = Tools(engine, local=local, deadline_s=deadline_s)
    partitions = _partitions(engine)
    where = f" This index's partitions: {', '.join(partitions)}." if partitions else ""
    server: MCPServer[Any] = MCPServer(
        SERVER_NAME, title="ragsieve", version=release, instructions=INSTRUCTIONS, log_level="WARNING",
    )

    def failed(exc: RagsieveError) -> ToolError:
        return ToolError(tools._message(exc))

    def access_of(ctx: Context) -> Access:
        # stdio: the client started this process and reads everything; over HTTP, the grants the
        # key check recorded on the request that carried this call (none when it recorded none).
        if local:
            return Access.all(name="stdio")
        try:
            request = ctx.request_context.request
        except ValueError:
            request = None
        scope = getattr(request, "scope", None)
        return request_access(scope) if isinstance(scope, dict) else Access()

    async def ask(
        ctx: Context, question: QuestionArg, k: AskK = None, partition: PartitionArg = None
    ) -> Annotated[CallToolResult, AskResult]:
        access = access_of(ctx)
        try:
            answer = await anyio.to_thread.run_sync(tools.ask, question, k, partition, access)
        except RagsieveError as exc:
            raise failed(exc) from exc
        result = tools.ask_result(answer)
        return CallToolResult(
            content=[TextContent(type="text", text=answer_text(result))],
            structured_content=result.model_dump(mode="json"),
        )

    async def search(
        ctx: Context, query: QueryArg, k: SearchK = 5, partition: PartitionArg = None
    ) -> Annotated[CallToolResult, SearchResult]:
        access = access_of(ctx)
        try:
            result = await anyio.to_thread.run_sync(tools.search, query, k, partition, access)
        except RagsieveError as exc:
            raise failed(exc) from exc
        return CallToolResult(
            content=[TextContent(type="text", text=search_text(result))],
            structured_content=result.model_dump(mode="json"),
        )

    async def audit(ctx: Context) -> CallToolResult:
        access = access_of(ctx)
        try:
            report = await anyio.to_thread.run_sync(lambda: engine.audit(access=access))
        except RagsieveError as exc:
            raise failed(exc) from exc
        return CallToolResult(
            content=[TextContent(type="text", text=audit_text(report))], structured_content=report,
        )

    server.add_tool(
        audit, name="audit", title="Audit the documents",
        description="Corpus-level problems in the indexed documents the caller may read: mirrors (copies of "
        "another document), coordinated voices (near-identical passages across documents or hosts) and "
        "conflicting documents (different values for the same fact), each with its documents, sentences and "
        "a 0-1 score. No model runs; computed once per index version.",
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    server.add_tool(
        ask, name="ask", title="Ask the documents (checked answer)",
        description="Answer a question from the indexed documents. Every answer is checked against the passages it "
        "cites: the result says whether it answered or abstained, which sources back each sentence (with a location "
        "to open), and, in words, why it abstained, what is uncertain, and any draft the checks withdrew." + where,
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    server.add_tool(
        search, name="search", title="Search the documents",
        description="Ranked passages from the indexed documents for a query, each with its text, source, citation "
        "and a 0-1 score (the top hit is 1). No model runs: use it to read the evidence yourself." + where,
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    return server


def audit_text(report: dict[str, Any], top: int = 20) -> str:
    """The audit as a few lines for a model to read: counts, then the strongest findings."""
    findings = report.get("findings") or []
    counts = ", ".join(f"{kind}: {n}" for kind, n in (report.get("counts") or {}).items())
    lines = [f"{len(findings)} findings over {report.get('passages', 0)} passages ({counts})."]
    for f in sorted(findings, key=lambda f: -float(f.get("score") or 0.0))[:top]:
        docs = ", ".join(str(d) for d in f.get("documents") or [])
        lines.append(f"- {f.get('kind')} ({float(f.get('score') or 0.0):.2f}): {docs}: {f.get('evidence', '')}")
    return "\n".join(lines)


def _partitions(engine: Engine) -> list[str]:
    try:
        return [str(d) for d in getattr(engine.snapshot().index, "domains", None) or []]
    except Exception:  # the description is a hint; a call names the problem itself
        return []


# ---------------------------------------------------------------------- HTTP
class ApiKeyMiddleware:
    """401 for a request without a key the server accepts, sent as ``ragsieve serve`` takes it
    (``Authorization: Bearer KEY`` or ``X-API-Key: KEY``); the key's grants go with the request,
    and the tools read only what they allow. ``key``: one all-access key, or a :class:`KeyRing`
    (``--keys-file``)."""

    def __init__(self, app: ASGIApp, key: str | KeyRing) -> None:
        self.app = app
        self.keys = key if isinstance(key, KeyRing) else KeyRing(api_key=key)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        access = self.keys.access_for(scope)
        if access is not None:
            record_access(scope, access)
            await self.app(scope, receive, send)
            return
        import json

        body = json.dumps({"error": {
            "message": API_KEY_MISSING,
            "type": "authentication_error", "code": "invalid_api_key", "param": None,
        }}).encode()
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b"Bearer"),
        ]})
        await send({"type": "http.response.body", "body": body, "more_body": False})


def _transport_security(allowed_hosts: Iterable[str] | None) -> TransportSecuritySettings:
    """The SDK's Host and Origin check, on the same names as the Host allow-list (off when the
    allow-list is off, as ``ragsieve serve`` answers any Host then)."""
    if allowed_hosts is None:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    names = [f"[{h}]" if ":" in h else h for h in sorted(allowed_hosts)]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[form for n in names for form in (n, f"{n}:*")],
        allowed_origins=[form for n in names for scheme in ("http", "https")
                         for form in (f"{scheme}://{n}", f"{scheme}://{n}:*")],
    )


def http_app(
    server: MCPServer[Any],
    *,
    api_key: str | KeyRing | None,
    allowed_hosts: frozenset[str] | None,
    max_body_bytes: int = 4 * 1024 * 1024,
    body_timeout_s: float = 30.0,
) -> ASGIApp:
    """The streamable HTTP app at ``/mcp`` behind the guards of ``ragsieve serve``: API key or
    keys (None: no key check, every caller reads everything, loopback only, as the command
    enforces), Host allow-list (None: any Host), body
    limit and read timeout, security headers."""
    from ragsieve.serve.guard import BodyLimitMiddleware, HostAllowListMiddleware, SecurityHeadersMiddleware

    app: ASGIApp = server.streamable_http_app(
        streamable_http_path=MCP_PATH, transport_security=_transport_security(allowed_hosts),
        max_request_body_size=max_body_bytes,
    )
    app = BodyLimitMiddleware(app, max_body_bytes, body_timeout_s)
    # Without a key every caller reads everything; the grants still go with each request.
    app = ApiKeyMiddleware(app, api_key or KeyRing())
    if allowed_hosts is not None:
        app = HostAllowListMiddleware(app, allowed_hosts)
    return SecurityHeadersMiddleware(app)

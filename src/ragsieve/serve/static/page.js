// Renders ragsieve's answer JSON (`ragsieve ask --json`, /v1/ask, or a chat completion's
// ragsieve_trace). Every value is inserted as text, never as HTML, so evidence cannot inject
// markup. Stages and fields the page does not know are still shown, generically.
(function () {
  "use strict";

  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v === undefined || v === null || v === false) continue;
        if (k === "text") node.textContent = String(v);
        else if (k === "class") node.className = v;
        else node.setAttribute(k, String(v));
      }
    }
    for (const child of children || []) {
      if (child === null || child === undefined) continue;
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }

  function fmt(x, digits) {
    if (typeof x !== "number" || !isFinite(x)) return x === undefined || x === null ? "" : String(x);
    return Math.abs(x) >= 100 ? x.toFixed(0) : x.toFixed(digits === undefined ? 3 : digits);
  }

  function short(value, max) {
    const s = typeof value === "string" ? value : JSON.stringify(value);
    return s && s.length > max ? s.slice(0, max) + "…" : (s === undefined ? "" : s);
  }

  function section(title, id) {
    const s = el("section", { id: id });
    s.appendChild(el("h2", { text: title }));
    return s;
  }

  function kv(obj, skip) {
    const dl = el("dl", { class: "kv" });
    for (const [k, v] of Object.entries(obj || {})) {
      if (skip && skip.includes(k)) continue;
      dl.appendChild(el("dt", { text: k }));
      dl.appendChild(el("dd", { text: typeof v === "number" ? fmt(v, 4) : short(v, 600) }));
    }
    return dl;
  }

  // Accept every JSON shape the project writes and return one answer-like object.
  function normalize(data) {
    let d = data || {};
    const presentation = d.presentation || (d.ragsieve_trace && d.ragsieve_trace.presentation);
    if (d.ragsieve_trace) d = d.ragsieve_trace;
    if (!d.trace && Array.isArray(d.events)) d = { question: d.query, trace: d };
    if (Array.isArray(d.hits) && !d.evidence) d = Object.assign({}, d, { question: d.query, search_only: true });
    d.trace = d.trace || {};
    d.trace.events = Array.isArray(d.trace.events) ? d.trace.events : [];
    d.trace.decisions = Array.isArray(d.trace.decisions) ? d.trace.decisions : [];
    d.evidence = Array.isArray(d.evidence) ? d.evidence : [];
    d.claims = Array.isArray(d.claims) ? d.claims : [];
    d.cited_ids = Array.isArray(d.cited_ids) ? d.cited_ids : [];
    d.presentation = presentation || d.presentation;
    return d;
  }

  // ---------------------------------------------------------------- the view
  // The service and `ragsieve trace view` send the answer with its "presentation": the view the
  // terminal prints too (ragsieve.present), with statuses, order, scales and wording decided
  // there. The page lays it out and decides nothing of its own.
  function viewOf(d) {
    const v = d.presentation;
    if (!v || typeof v !== "object") return null;
    for (const k of ["sentences", "sources", "withdrawn", "facts", "candidates", "statuses", "conflicts",
      "value_failures", "timings", "stage_records"]) v[k] = Array.isArray(v[k]) ? v[k] : [];
    return v;
  }

  // ---------------------------------------------------------------- citations and passages
  // Served pages open a cited passage as a document: this page with ?passage=<id> (a link that
  // also opens in a new tab); a saved page (`ragsieve trace view`, from a file) has no service,
  // so its citations link to the evidence row instead.
  function servedPage() {
    return location.protocol === "http:" || location.protocol === "https:";
  }

  function passageHref(id, quote) {
    if (!servedPage()) return "#cand-" + id;
    const params = new URLSearchParams({ passage: String(id) });
    if (quote) params.set("q", quote);
    return "?" + params.toString();
  }

  // A link that opens the cited passage (title, citation, page, section, its text).
  function sourceLink(src, label, quote) {
    const id = String(src.id);
    const a = el("a", { class: "source-link", href: passageHref(id, quote), title: "open the cited passage: " + id,
      "data-chunk-id": id, text: label || String(src.citation || id) });
    if (servedPage()) a.addEventListener("click", (event) => {
      if (event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;  // a new tab: the document
      event.preventDefault();
      openPassage(id, quote);
    });
    return a;
  }

  function authHeaders() {
    const key = (document.getElementById("api-key") || {}).value || sessionStorage.getItem("ragsieve-key") || "";
    return key ? { Authorization: "Bearer " + key } : {};
  }

  async function fetchPassage(id) {
    const resp = await fetch("v1/passages/" + encodeURIComponent(String(id)), { headers: authHeaders() });
    const data = await resp.json().catch(() => ({ error: { message: "the server answered " + resp.status } }));
    if (!resp.ok) throw new Error(data.error && data.error.message ? data.error.message : "HTTP " + resp.status);
    return data;
  }

  async function openPassage(id, quote) {
    const panel = passagePanel();
    panel.textContent = "";
    panel.appendChild(el("p", { class: "meta", text: "opening " + id + "…" }));
    panel.hidden = false;
    try {
      renderPassage(panel, await fetchPassage(id), quote);
    } catch (err) {
      panel.textContent = "";
      panel.appendChild(el("h2", { text: "Cited passage" }));
      panel.appendChild(el("p", { class: "error", text: "could not open " + id + ": " + err.message }));
    }
    panel.setAttribute("data-loaded", "true");
    panel.scrollIntoView({ block: "nearest" });
  }

  function passagePanel() {
    let panel = document.getElementById("passage");
    if (!panel) {
      panel = el("article", { id: "passage", class: "passage" });
      document.getElementById("result").prepend(panel);
    }
    panel.removeAttribute("data-loaded");
    return panel;
  }

  function words(text) {
    return new Set((String(text).toLowerCase().match(/[\p{L}\p{N}]+/gu) || []).filter((w) => w.length > 2));
  }

  // The passage's text with the span the answer cites marked: the sentence sharing most words
  // with the answer sentence that cites it; the whole passage (the chunk is what was cited) when
  // no answer sentence is given or none shares a word with it.
  function markedText(text, quote) {
    const box = el("div", { class: "passage-text" });
    const sentences = String(text).match(/[^.!?]+(?:[.!?]+["')\]]*\s*|$)/g) || [String(text)];
    let best = -1;
    if (quote) {
      const want = words(quote);
      let top = 0;
      sentences.forEach((s, i) => {
        let n = 0;
        for (const w of words(s)) if (want.has(w)) n++;
        if (n > top) { top = n; best = i; }
      });
    }
    if (best < 0) {
      box.appendChild(el("mark", { class: "cited-span", text: String(text) }));
      return box;
    }
    sentences.forEach((s, i) => box.appendChild(i === best ? el("mark", { class: "cited-span", text: s }) : document.createTextNode(s)));
    return box;
  }

  // A cited passage as a document: its title, the citation, page and section in words, its text.
  function renderPassage(panel, p, quote) {
    panel.textContent = "";
    const title = p.title || (p.path ? p.path.split("/").pop() : "") || p.source || p.id;
    panel.appendChild(el("h2", { class: "passage-title", text: title }));
    const facts = [];
    facts.push(el("span", { class: "loc-citation", text: "cited as " + (p.citation || p.id) }));
    if (p.page !== undefined && p.page !== null) {
      facts.push(el("span", { class: "loc-page", text: "page " + p.page +
        (p.page_label && String(p.page_label) !== String(p.page) ? " (printed " + p.page_label + ")" : "") }));
    }
    if (p.heading && p.heading.length) {
      facts.push(el("span", { class: "loc-heading", text: "section " + (Array.isArray(p.heading) ? p.heading.join(" › ") : String(p.heading)) }));
    }
    if (p.path) facts.push(el("span", { class: "loc-file", text: "in " + p.path }));
    panel.appendChild(el("p", { class: "meta passage-meta" }, facts));
    panel.appendChild(markedText(p.text || "", quote));
    if (p.link) {
      const web = /^https?:/i.test(p.link);
      // A file:// link opens in the user's own browser (pages served over http may not open
      // it on click; it can be copied). http(s) sources open in a new tab.
      panel.appendChild(el("p", { class: "meta" }, [
        web ? "original: " : "file on this machine: ",
        el("a", { class: "open-source", href: p.link, target: web ? "_blank" : null, rel: "noopener noreferrer", text: p.link }),
      ]));
    }
    panel.appendChild(el("p", { class: "meta chunk-id", text: "passage " + p.id + (p.index_generation ? " · index " + p.index_generation : "") }));
  }

  // ---------------------------------------------------------------- the answer
  function sourceMarker(v, n, quote) {
    const src = v.sources.find((s) => s.n === n);
    if (!src) return document.createTextNode("[" + n + "]");
    return sourceLink(src, "[" + n + "]", quote);
  }

  // An answer sentence with its [n] markers as links to the passages they cite.
  function sentenceNode(v, s) {
    const frag = document.createDocumentFragment();
    for (const part of String(s.text).split(/(\[\d+\])/)) {
      const m = /^\[(\d+)\]$/.exec(part);
      if (m) frag.appendChild(sourceMarker(v, Number(m[1]), s.text.replace(/\[\d+\]/g, "")));
      else frag.appendChild(document.createTextNode(part));
    }
    return frag;
  }

  function renderAnswer(d, v) {
    const s = section("Answer", "answer");
    if (v.outcome === "abstained") {
      s.appendChild(el("p", { class: "abstain" }, [el("strong", { text: "Abstained. " }), v.abstain_reason || "no reason given"]));
    }
    const box = el("div", { class: "answer" });
    if (v.sentences.length) {
      for (const c of v.sentences) {
        const verdict = c.supported === true ? "supported" : (c.supported === false ? "unsupported" : "unchecked");
        const span = el("span", { class: "claim " + verdict, title: verdict + (c.support !== null && c.support !== undefined ? " · support " + fmt(c.support, 2) : "") });
        span.appendChild(sentenceNode(v, c));
        box.appendChild(span);
        if (c.supported !== null && c.supported !== undefined) {
          box.appendChild(el("span", { class: "badge " + verdict, text: (c.supported ? "✓ supported " : "✗ unsupported ") + fmt(c.support, 2) }));
        }
        if (c.uncited) box.appendChild(el("span", { class: "badge no-source", text: "no source" }));
        box.appendChild(document.createTextNode(" "));
      }
    } else {
      box.appendChild(document.createTextNode(v.text || "(empty)"));
    }
    s.appendChild(box);
    if (v.caveat) s.appendChild(el("p", { class: "caveat", text: "Caveat: " + v.caveat }));
    if (v.citation_note) s.appendChild(el("p", { class: "citation-note", text: v.citation_note }));
    const cited = v.sources.filter((src) => src.cited);
    if (cited.length) {
      s.appendChild(el("div", { class: "sources" }, [el("strong", { text: "Sources" }),
        el("ol", null, cited.map((src) => el("li", { value: String(src.n) }, [sourceLink(src, null,
          v.sentences.filter((x) => x.sources.includes(src.n)).map((x) => x.text.replace(/\[\d+\]/g, "")).join(" "))])))]));
    }
    for (const w of v.withdrawn) {
      const list = el("ul", null, (w.sentences.length ? w.sentences : [{ text: w.text }]).map((x) => el("li", null, [
        x.supported === true || x.supported === false ? el("span", { class: "badge " + (x.supported ? "supported" : "unsupported"),
          text: (x.supported ? "supported" : "unsupported") + (typeof x.support === "number" ? " " + fmt(x.support, 2) : "") }) : null,
        " " + x.text])));
      s.appendChild(el("div", { class: "withdrawn" }, [
        el("strong", { text: "Withdrawn draft" }), " (replaced by the " + w.replaced_by + "): ",
        el("span", { class: "why", text: w.reason }), list]));
    }
    const facts = [];
    if (v.confidence_note) facts.push(v.confidence_note.charAt(0).toUpperCase() + v.confidence_note.slice(1) + ".");
    else if (typeof v.confidence === "number") facts.push("Confidence " + fmt(v.confidence, 2) + " on a 0-1 scale.");
    for (const f of v.facts.concat(v.notes || [])) facts.push(f);
    if (facts.length) s.appendChild(el("ul", { class: "facts" }, facts.map((f) => el("li", { text: f }))));
    return s;
  }

  function renderRoute(v) {
    if (!v.route) return null;
    const s = section("Route", "route");
    s.appendChild(el("p", { class: "route-words", text: v.route }));
    return s;
  }

  function statusClass(status) {
    return String(status).replace(/ /g, "-");
  }

  function renderCandidates(v) {
    const cands = v.candidates;
    if (!cands.length) return null;
    const s = section("Candidates (" + cands.length + ")", "candidates");
    const legend = el("dl", { class: "legend" });
    for (const st of v.statuses) {
      legend.appendChild(el("dt", null, [el("span", { class: "badge " + statusClass(st.status), text: st.status })]));
      legend.appendChild(el("dd", { text: st.meaning }));
    }
    s.appendChild(legend);
    s.appendChild(el("p", { class: "legend", text: "In rank order; " + v.score_note + "." }));
    if (v.judge) s.appendChild(el("p", { class: "legend", text: v.judge }));
    const keys = [];
    for (const c of cands) for (const k of Object.keys(c.scores || {})) if (!keys.includes(k)) keys.push(k);
    const checks = [];
    for (const c of cands) for (const x of c.checks || []) if (!checks.includes(x.check)) checks.push(x.check);
    const head = el("tr", null, [el("th", { text: "#" }), el("th", { text: "status" }), el("th", { text: "score (0-1)" }),
      ...keys.map((k) => el("th", { text: k + (k === "dense" ? " (cosine)" : " (0-1)") })), ...checks.map((c) => el("th", { text: c })),
      el("th", { text: "evidence" })]);
    const body = el("tbody");
    for (const c of cands) {
      const cls = statusClass(c.status);
      const statusCell = el("td", null, [el("span", { class: "badge " + cls, text: c.status })]);
      if (c.cited) statusCell.appendChild(el("span", { class: "badge selected", text: "cited" }));
      if (c.why) statusCell.appendChild(el("div", { class: "why", text: c.why }));
      const raw = Object.entries(c.raw_scores || {}).map(([k, x]) => k + " " + fmt(x, 4)).join(", ");
      body.appendChild(el("tr", { id: "cand-" + c.id, class: cls, "data-status": cls }, [
        el("td", { class: "num", text: c.rank !== undefined && c.rank !== null ? c.rank : "" }),
        statusCell,
        el("td", { class: "num", title: "raw: " + raw, text: fmt(c.score, 2) }),
        ...keys.map((k) => el("td", { class: "num", title: "raw " + fmt((c.raw_scores || {})[k], 4), text: k in (c.scores || {}) ? fmt(c.scores[k], 2) : "" })),
        ...checks.map((check) => {
          const td = el("td");
          for (const x of (c.checks || []).filter((y) => y.check === check)) {
            const label = x.verdict === "dropped" && x.check === "select" ? "not needed" : String(x.verdict);
            td.appendChild(el("span", { class: "badge " + statusClass(label === "kept" ? "kept-verdict" : label),
              text: label + (x.score !== undefined ? " " + fmt(x.score, 2) : "") }));
            if (x.reason) td.appendChild(el("div", { class: "why", text: x.reason }));
          }
          return td;
        }),
        el("td", { class: "text" }, [
          c.title ? el("div", { class: "title", text: c.title }) : null,
          el("div", { text: short(c.text || "", 240) }),
          el("div", { class: "src" }, [sourceLink(c), " · " + [c.domain, c.id].filter(Boolean).join(" · ")]),
        ]),
      ]));
    }
    s.appendChild(el("table", null, [el("thead", null, [head]), body]));
    return s;
  }

  function valueText(x) {
    if (x === undefined || x === null) return "";
    if (typeof x !== "object") return String(x);
    return String(x.text !== undefined ? x.text : (x.value !== undefined ? x.value : JSON.stringify(x)));
  }

  function renderValueChecks(v) {
    if (!v.value_failures.length && !v.values_checked) return null;
    const s = section("Values checked against the evidence", "values");
    s.appendChild(el("p", { class: "meta", text: v.values_checked + " value" + (v.values_checked === 1 ? "" : "s") +
      " (numbers, dates, names) checked; " + v.value_failures.length + " not stated by the evidence" }));
    if (!v.value_failures.length) return s;
    const body = el("tbody");
    for (const f of v.value_failures) {
      const says = f.evidence_says === undefined || f.evidence_says === null ? "no value of this kind" : valueText(f.evidence_says);
      body.appendChild(el("tr", { class: "value-failure" }, [
        el("td", { text: valueText(f.value !== undefined ? f.value : f) }),
        el("td", { text: f.kind || (f.value && f.value.kind) || "" }),
        el("td", { text: says }),
        el("td", { class: "text", text: f.sentence || "" }),
      ]));
    }
    s.appendChild(el("table", null, [el("thead", null, [el("tr", null, [
      el("th", { text: "answer says" }), el("th", { text: "kind" }), el("th", { text: "evidence says" }),
      el("th", { text: "sentence" })])]), body]));
    return s;
  }

  // The conflict stage records its verdict ("conflict": true or false) with every check, agreeing
  // sources and "no passage states an answer" included: only the checks that found a conflict
  // are conflicts to show. The view's entries follow the trace's conflict records in order; a
  // record without a verdict (an older trace) is shown as before.
  function shownConflicts(v, d) {
    const records = ((d && d.trace && d.trace.events) || []).filter(
      (e) => e && e.stage === "conflict" && Array.isArray(e.groups));
    return (v.conflicts || []).filter((ev, i) => {
      const verdict = ev.conflict !== undefined ? ev.conflict : (records[i] || {}).conflict;
      return verdict !== false;
    });
  }

  function renderConflicts(v, d) {
    const conflicts = shownConflicts(v, d);
    if (!conflicts.length) return null;
    const s = section("Conflicting answers in the evidence", "conflicts");
    for (const ev of conflicts) {
      if (ev.message) s.appendChild(el("p", { class: "conflict-message", text: String(ev.message) }));
      if (ev.decision) s.appendChild(el("p", { class: "meta", text: "decision: " + ev.decision }));
      const body = el("tbody");
      for (const g of ev.groups || []) {
        const count = g.count !== undefined ? g.count : g.independent_sources;
        const sources = (g.sources || []).map((src) => typeof src === "object" && src !== null
          ? String(src.source || (src.chunk_ids || []).join(", ")) : String(src));
        body.appendChild(el("tr", { class: "conflict-group" }, [
          el("td", { text: valueText(g.answer) }),
          el("td", { class: "num", text: count === undefined ? "" : String(count) }),
          el("td", { class: "num", text: typeof g.weight === "number" ? fmt(g.weight, 2) : "" }),
          el("td", { class: "text", text: sources.join(" · ") }),
        ]));
      }
      s.appendChild(el("table", null, [el("thead", null, [el("tr", null, [
        el("th", { text: "answer" }), el("th", { text: "independent sources" }), el("th", { text: "weight" }),
        el("th", { text: "sources" })])]), body]));
    }
    return s;
  }

  function renderTimings(v) {
    if (!v.timings.length) return null;
    const s = section("Timings", "timings");
    const grid = el("div", { class: "bars" });
    for (const t of v.timings) {
      grid.appendChild(el("span", { text: t.stage }));
      const bar = el("div", { class: "bar", "data-stage": t.stage });
      // Through the CSSOM: the page's Content-Security-Policy refuses inline style attributes.
      bar.style.width = Math.max(0.5, 100 * Number(t.share || 0)).toFixed(2) + "%";
      grid.appendChild(el("div", { class: "track" }, [bar]));
      grid.appendChild(el("span", { class: "ms", text: fmt(t.ms, 1) + " ms" }));
    }
    s.appendChild(grid);
    s.appendChild(el("p", { class: "meta", text: v.llm_calls + " LLM call" + (v.llm_calls === 1 ? "" : "s") + " · " +
      v.prompt_tokens + " prompt tokens · " + v.completion_tokens + " completion tokens" }));
    return s;
  }

  function renderEvents(v) {
    if (!v.stage_records.length) return null;
    const s = section("Stages", "stages");
    for (const ev of v.stage_records) {
      const summary = el("summary", { text: String(ev.stage || "event") });
      s.appendChild(el("details", { class: "event", "data-stage": ev.stage }, [summary, kv(ev, ["stage"])]));
    }
    return s;
  }

  function render(data) {
    const d = normalize(data);
    const v = viewOf(d);
    const root = document.getElementById("result");
    root.textContent = "";
    if (!v) {
      root.appendChild(el("p", { class: "error", text: "This answer carries no presentation; open it with `ragsieve trace view` or ask the service." }));
      document.body.setAttribute("data-rendered", "true");
      return;
    }
    const head = el("section", { id: "question-head" }, [el("div", { class: "question", text: v.question || "" })]);
    const meta = el("div", { class: "meta" });
    if (v.pipeline) meta.appendChild(el("span", { text: "pipeline " + v.pipeline }));
    if (typeof v.confidence === "number") meta.appendChild(el("span", { text: "confidence " + fmt(v.confidence, 2) }));
    if (v.index_generation) meta.appendChild(el("span", { text: "index " + v.index_generation }));
    head.appendChild(meta);
    root.appendChild(head);
    if (!v.search_only) root.appendChild(renderAnswer(d, v));
    const parts = [renderRoute(v), renderConflicts(v, d), renderValueChecks(v), renderCandidates(v), renderTimings(v), renderEvents(v)];
    for (const part of parts) if (part) root.appendChild(part);
    const raw = el("details", { class: "event" }, [el("summary", { text: "raw JSON" }), el("pre", { text: JSON.stringify(data, null, 2) })]);
    root.appendChild(section("Raw", "raw")).appendChild(raw);
    document.body.setAttribute("data-rendered", "true");
  }

  function setStatus(text, isError) {
    const s = document.getElementById("status");
    s.textContent = text;
    s.className = isError ? "error" : "";
  }

  // ---------------------------------------------------------------- streaming (stage progress, tokens)
  // The page asks through /v1/ask/stream: each stage is listed as it finishes, the answer's tokens
  // appear as the model generates them, marked as not yet checked, and the checked answer replaces
  // them when it arrives (a "retracted" event says why streamed text was withdrawn).

  async function* readServerSentEvents(resp) {
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        let kind = "message";
        const data = [];
        for (const line of block.split("\n")) {
          if (line.startsWith("event: ")) kind = line.slice(7);
          else if (line.startsWith("data: ")) data.push(line.slice(6));
        }
        if (data.length) yield { kind: kind, data: JSON.parse(data.join("\n")) };
      }
    }
  }

  function streamProgressPanel() {
    const root = document.getElementById("result");
    root.textContent = "";
    const stages = el("ol", { id: "stream-stages", class: "stream-stages" });
    const text = el("p", { id: "stream-answer", class: "stream-answer unchecked", title: "being generated; not yet checked" });
    const note = el("p", { id: "stream-note", class: "stream-note" });
    const panel = el("section", { id: "stream-progress" }, [el("h2", { text: "Working" }), stages, text, note]);
    root.appendChild(panel);
    return { stages: stages, text: text, note: note };
  }

  function streamStageRunning(panel, stage) {
    const item = el("li", { class: "stage running", "data-stage": stage, text: stage + " …" });
    panel.stages.appendChild(item);
    setStatus("running " + stage + "…");
  }

  function streamStageFinished(panel, data) {
    let item = panel.stages.querySelector('li[data-stage="' + CSS.escape(data.stage) + '"].running');
    if (!item) {
      item = el("li", { "data-stage": data.stage });
      panel.stages.appendChild(item);
    }
    item.className = "stage finished";
    const kept = (data.decisions || []).filter((x) => x.verdict === "kept").length;
    const dropped = (data.decisions || []).filter((x) => x.verdict === "dropped").length;
    let detail = fmt(data.duration_ms, 0) + " ms";
    if (kept || dropped) detail += " · kept " + kept + ", dropped " + dropped;
    item.textContent = data.stage + " — " + detail;
  }

  function streamToken(panel, data) {
    panel.text.textContent += data.text;
  }

  function streamRetracted(panel, data) {
    panel.text.classList.add("retracted");
    panel.note.textContent = "Withdrawn: " + data.reason;
    if (data.replacement === "regenerated") {
      panel.text.textContent = "";
      panel.text.classList.remove("retracted");
    }
  }

  async function askStreaming(body, headers) {
    const resp = await fetch("v1/ask/stream", { method: "POST", headers: headers, body: JSON.stringify(body) });
    if (!resp.ok) {
      const data = await resp.json().catch(() => ({ error: { message: "the server answered " + resp.status + " without JSON" } }));
      const retry = resp.headers.get("Retry-After");
      return { error: (data.error && data.error.message ? data.error.message : "HTTP " + resp.status) + (retry ? " (retry in " + retry + " s)" : "") };
    }
    const panel = streamProgressPanel();
    let answer = null;
    for await (const event of readServerSentEvents(resp)) {
      if (event.kind === "stage_start") streamStageRunning(panel, event.data.stage);
      else if (event.kind === "stage") streamStageFinished(panel, event.data);
      else if (event.kind === "token") streamToken(panel, event.data);
      else if (event.kind === "retracted") streamRetracted(panel, event.data);
      else if (event.kind === "answer") answer = event.data.answer;
      else if (event.kind === "error") return { error: event.data.message || "the answer failed" };
    }
    return answer ? { answer: answer } : { error: "the stream ended without an answer" };
  }

  async function ask(event) {
    event.preventDefault();
    const question = document.getElementById("question").value.trim();
    if (!question) return;
    const pipeline = document.getElementById("pipeline").value;
    const key = document.getElementById("api-key").value;
    if (key) sessionStorage.setItem("ragsieve-key", key);
    const headers = { "Content-Type": "application/json" };
    if (key) headers.Authorization = "Bearer " + key;
    const button = document.getElementById("ask-button");
    button.disabled = true;
    document.body.removeAttribute("data-rendered");
    setStatus("asking…");
    const started = performance.now();
    try {
      const body = { question: question };
      if (pipeline) body.pipeline = pipeline;
      const result = await askStreaming(body, headers);
      if (result.error) {
        setStatus(result.error, true);
        return;
      }
      render(result.answer);
      setStatus("answered in " + ((performance.now() - started) / 1000).toFixed(1) + " s");
    } catch (err) {
      setStatus("request failed: " + err, true);
    } finally {
      button.disabled = false;
    }
  }

  // The page opened at ?passage=<id>: the cited passage alone, as a document.
  async function showPassageDocument(id, quote) {
    document.title = "ragsieve — cited passage";
    const panel = passagePanel();
    try {
      renderPassage(panel, await fetchPassage(id), quote);
    } catch (err) {
      panel.textContent = "";
      panel.appendChild(el("h2", { text: "Cited passage" }));
      panel.appendChild(el("p", { class: "error", text: "could not open " + id + ": " + err.message }));
    }
    panel.setAttribute("data-loaded", "true");
    document.body.setAttribute("data-rendered", "true");
  }

  window.ragsieveRender = render;
  window.ragsieveShownConflicts = shownConflicts;
  document.addEventListener("DOMContentLoaded", () => {
    const embedded = JSON.parse(document.getElementById("ragsieve-data").textContent || "null");
    if (embedded) {
      render(embedded);
      return;
    }
    const params = new URLSearchParams(location.search);
    if (params.get("passage")) {
      showPassageDocument(params.get("passage"), params.get("q"));
      return;
    }
    const form = document.getElementById("ask-form");
    form.hidden = false;
    form.addEventListener("submit", ask);
    const saved = sessionStorage.getItem("ragsieve-key");
    if (saved) document.getElementById("api-key").value = saved;
    const q = new URLSearchParams(location.search).get("q");
    if (q) document.getElementById("question").value = q;
  });
})();

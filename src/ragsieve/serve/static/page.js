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
    if (d.ragsieve_trace) d = d.ragsieve_trace;
    if (!d.trace && Array.isArray(d.events)) d = { question: d.query, trace: d };
    if (Array.isArray(d.hits) && !d.evidence) d = Object.assign({}, d, { question: d.query, search_only: true });
    d.trace = d.trace || {};
    d.trace.events = Array.isArray(d.trace.events) ? d.trace.events : [];
    d.trace.decisions = Array.isArray(d.trace.decisions) ? d.trace.decisions : [];
    d.evidence = Array.isArray(d.evidence) ? d.evidence : [];
    d.claims = Array.isArray(d.claims) ? d.claims : [];
    d.cited_ids = Array.isArray(d.cited_ids) ? d.cited_ids : [];
    return d;
  }

  function candidateList(d) {
    const byId = new Map();
    const add = (hit, origin) => {
      if (!hit || hit.id === undefined || byId.has(String(hit.id))) return;
      byId.set(String(hit.id), Object.assign({ origin: origin }, hit));
    };
    for (const ev of d.trace.events) {
      if (Array.isArray(ev.candidates)) ev.candidates.forEach((h) => add(h, ev.stage));
    }
    (d.hits || []).forEach((h) => add(h, "search"));
    d.evidence.forEach((h) => add(h, "evidence"));
    for (const dec of d.trace.decisions) add({ id: dec.id }, dec.check);
    return Array.from(byId.values());
  }

  function citeLink(d, id) {
    const n = d.evidence.findIndex((h) => String(h.id) === String(id));
    return el("a", { class: "cite", href: "#cand-" + id, title: String(id), text: "[" + (n >= 0 ? n + 1 : id) + "]" });
  }

  // ---------------------------------------------------------------- citations and passages
  // A hit's citation as a person reads it (path:page, path#heading, its address; the id otherwise).
  function citationText(hit) {
    return String((hit && (hit.citation || hit.id)) || "");
  }

  // Served pages fetch cited passages from the service; a saved page (`ragsieve trace view`,
  // opened from a file) has no service, so its citations link to the evidence row instead.
  function servedPage() {
    return location.protocol === "http:" || location.protocol === "https:";
  }

  function passageHref(id) {
    return servedPage() ? "v1/passages/" + encodeURIComponent(String(id)) : "#cand-" + id;
  }

  // A link that opens the cited passage (its text, file and page) in the passage panel.
  function sourceLink(hit, label) {
    const id = String(hit.id);
    const a = el("a", { class: "source-link", href: passageHref(id), title: "open the cited passage: " + id,
      "data-chunk-id": id, text: label || citationText(hit) });
    if (servedPage()) a.addEventListener("click", (event) => { event.preventDefault(); openPassage(id); });
    return a;
  }

  function authHeaders() {
    const key = (document.getElementById("api-key") || {}).value || sessionStorage.getItem("ragsieve-key") || "";
    return key ? { Authorization: "Bearer " + key } : {};
  }

  async function openPassage(id) {
    const panel = passagePanel();
    panel.textContent = "";
    panel.appendChild(el("h2", { text: "Cited passage" }));
    panel.appendChild(el("p", { class: "meta", text: "loading " + id + "…" }));
    panel.hidden = false;
    try {
      const resp = await fetch(passageHref(id), { headers: authHeaders() });
      const data = await resp.json().catch(() => ({ error: { message: "the server answered " + resp.status } }));
      if (!resp.ok) throw new Error(data.error && data.error.message ? data.error.message : "HTTP " + resp.status);
      renderPassage(panel, data);
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
      panel = el("section", { id: "passage", class: "passage" });
      document.getElementById("result").prepend(panel);
    }
    panel.removeAttribute("data-loaded");
    return panel;
  }

  // Where the passage came from, in words: file, page (and page label), section, characters.
  function locationFacts(p) {
    const facts = [];
    if (p.path) facts.push(["file", p.path]);
    if (p.page !== undefined && p.page !== null) {
      facts.push(["page", String(p.page) + (p.page_label && String(p.page_label) !== String(p.page) ? " (labelled " + p.page_label + ")" : "")]);
    }
    if (p.heading && p.heading.length) facts.push(["section", Array.isArray(p.heading) ? p.heading.join(" › ") : String(p.heading)]);
    if (p.url) facts.push(["address", p.url]);
    if (typeof p.char_start === "number" && typeof p.char_end === "number") facts.push(["characters", p.char_start + "–" + p.char_end]);
    if (!p.path && !p.url) facts.push(["source", p.source || p.id]);
    return facts;
  }

  function renderPassage(panel, p) {
    panel.textContent = "";
    panel.appendChild(el("h2", { text: "Cited passage: " + (p.citation || p.id) }));
    const dl = el("dl", { class: "kv" });
    for (const [k, v] of locationFacts(p)) {
      dl.appendChild(el("dt", { text: k }));
      dl.appendChild(el("dd", { class: "loc-" + k, text: v }));
    }
    panel.appendChild(dl);
    if (p.title) panel.appendChild(el("div", { class: "title", text: p.title }));
    panel.appendChild(el("blockquote", { class: "passage-text", text: p.text || "" }));
    if (p.link) {
      const web = /^https?:/i.test(p.link);
      // A file:// link opens in the user's own browser (pages served over http may not open
      // it on click; it can be copied). http(s) sources open in a new tab.
      panel.appendChild(el("p", { class: "meta" }, [
        web ? "source: " : "file on this machine: ",
        el("a", { class: "open-source", href: p.link, target: web ? "_blank" : null, rel: "noopener noreferrer", text: p.link }),
      ]));
    }
    panel.appendChild(el("p", { class: "meta", text: "chunk " + p.id + (p.index_generation ? " · index " + p.index_generation : "") }));
  }

  // The cited evidence as a numbered list of links to each passage.
  function renderSources(d) {
    const cited = new Set(d.cited_ids.map(String));
    const items = [];
    d.evidence.forEach((hit, i) => {
      if (!cited.has(String(hit.id))) return;
      items.push(el("li", { value: String(i + 1) }, [sourceLink(hit)]));
    });
    if (!items.length) return null;
    return el("div", { class: "sources" }, [el("strong", { text: "Sources" }), el("ol", null, items)]);
  }

  // "[2]" markers in generated text become links to the second piece of evidence.
  function linkMarkers(d, text) {
    const frag = document.createDocumentFragment();
    const parts = String(text).split(/(\[\d+\])/);
    for (const part of parts) {
      const m = /^\[(\d+)\]$/.exec(part);
      const hit = m ? d.evidence[Number(m[1]) - 1] : null;
      if (hit) frag.appendChild(el("a", { class: "cite", href: "#cand-" + hit.id, title: String(hit.id), text: part }));
      else frag.appendChild(document.createTextNode(part));
    }
    return frag;
  }

  // The verify stage's answer for a reply that pasted a passage: the passage's sentence that
  // states the value asked for (a "responsive" record with attempt "extracted").
  function extractionNote(d) {
    const events = ((d.trace && d.trace.events) || []).filter((e) => e.stage === "responsive" && e.attempt === "extracted");
    if (!events.length) return null;
    const ev = events[events.length - 1];
    const hit = ev.position ? d.evidence[Number(ev.position) - 1] : null;
    const mark = "[" + ev.position + "]";
    const ref = hit ? el("a", { class: "cite", href: "#cand-" + hit.id, title: String(hit.id), text: mark }) : mark;
    if (ev.ok) return el("p", { class: "meta extracted" }, ["answer extracted from the pasted passage ", ref]);
    if (ev.position) {
      return el("p", { class: "meta extracted" }, ["the sentence extracted from the pasted passage ", ref,
        " was refused: " + String(ev.reason || "") + (ev.detail ? " (" + ev.detail + ")" : "")]);
    }
    return el("p", { class: "meta extracted" }, ["nothing extracted from the pasted passage: " + String(ev.detail || "")]);
  }

  function renderAnswer(d) {
    const s = section("Answer", "answer");
    if (d.abstained) {
      s.appendChild(el("p", { class: "abstain" }, [el("strong", { text: "Abstained. " }),
        d.abstain_reason ? String(d.abstain_reason) : "no reason given"]));
    }
    const box = el("div", { class: "answer" });
    if (d.claims.length) {
      for (const c of d.claims) {
        const ok = !!c.supported;
        const span = el("span", {
          class: "claim " + (ok ? "supported" : "unsupported"),
          title: (ok ? "supported" : "unsupported") + " · score " + fmt(c.score) + (c.judge ? " · " + c.judge : ""),
        });
        span.appendChild(linkMarkers(d, c.sentence));
        box.appendChild(span);
        box.appendChild(el("span", { class: "badge " + (ok ? "supported" : "unsupported"),
          text: (ok ? "✓ supported " : "✗ unsupported ") + fmt(c.score, 2) }));
        for (const id of c.cited_ids || []) box.appendChild(citeLink(d, id));
        box.appendChild(document.createTextNode(" "));
      }
    } else {
      box.appendChild(linkMarkers(d, d.answer || ""));
    }
    s.appendChild(box);
    const extracted = extractionNote(d);
    if (extracted) s.appendChild(extracted);
    const sources = renderSources(d);
    if (sources) s.appendChild(sources);
    if (d.cited_ids.length) {
      const p = el("p", { class: "meta" }, ["cites "]);
      d.cited_ids.forEach((id) => { p.appendChild(citeLink(d, id)); p.appendChild(document.createTextNode(" ")); });
      s.appendChild(p);
    }
    return s;
  }

  function renderRoute(d) {
    const routes = d.trace.events.filter((e) => e.stage === "route");
    if (!routes.length) return null;
    const s = section("Route", "route");
    for (const r of routes) s.appendChild(kv(r, ["stage"]));
    return s;
  }

  // ---------------------------------------------------------------- trace wording
  // Evidence the selection left out although no check removed it (the minimal cover did not
  // need it, or it ranked beyond the top k) is "not needed": relevant, not rejected.
  function isNotNeeded(dec) {
    return dec && dec.verdict === "dropped" && dec.check === "select";
  }

  function verdictLabel(dec) {
    return isNotNeeded(dec) ? "not needed" : String(dec.verdict);
  }

  function verdictClass(dec) {
    if (isNotNeeded(dec)) return "not-needed";
    return dec.verdict === "kept" ? "kept-verdict" : String(dec.verdict);
  }

  function candidateStatus(decs, isSelected) {
    if (isSelected) return { status: "selected" };
    const removed = decs.find((x) => x.verdict === "dropped" && !isNotNeeded(x));
    if (removed) return { status: "dropped", why: "by " + removed.check + ": " + (removed.reason || "") };
    const flagged = decs.find((x) => x.verdict === "flagged");
    if (flagged) return { status: "flagged" };
    const unneeded = decs.find(isNotNeeded);
    if (unneeded) return { status: "not-needed", why: unneeded.reason || "" };
    return { status: "kept" };
  }

  // Score columns on a stated scale: fusion and BM25 scores have none of their own, so they are
  // shown divided by the top candidate's (0-1, top = 1.00); a dense score is a cosine (at most 1).
  const SCORE_SCALES = {
    fused: { header: "fused (0-1, top = 1)", relative: true },
    sparse: { header: "sparse (0-1, top = 1)", relative: true },
    dense: { header: "dense (cosine, ≤ 1)", relative: false },
  };

  function scoreColumns(cands) {
    const keys = [];
    for (const c of cands) for (const k of Object.keys(c.scores || {})) if (!keys.includes(k)) keys.push(k);
    return keys.map((k) => {
      const scale = SCORE_SCALES[k] || { header: k + " (0-1, top = 1)", relative: true };
      const top = Math.max(0, ...cands.map((c) => Number((c.scores || {})[k])).filter((v) => isFinite(v)));
      return {
        key: k, header: scale.header,
        value: (c) => {
          const raw = (c.scores || {})[k];
          if (typeof raw !== "number" || !isFinite(raw)) return "";
          return scale.relative ? fmt(top > 0 ? Math.max(raw, 0) / top : 0, 2) : fmt(raw, 2);
        },
        raw: (c) => (c.scores || {})[k],
      };
    });
  }

  function renderCandidates(d) {
    const cands = candidateList(d);
    if (!cands.length) return null;
    const s = section("Candidates (" + cands.length + ")", "candidates");
    s.appendChild(el("p", { class: "legend", text:
      "In rank order. selected = in the evidence the answer was generated from; not needed = relevant, but the " +
      "selection did not need it (the minimal cover was complete without it, or it ranked below the top k); " +
      "dropped = a check removed it (which one and why); kept = passed every check but was not selected. " +
      "Scores are on a 0-1 scale: fusion and keyword scores divided by the top candidate's, dense scores are cosines." }));
    const decisions = new Map();
    const checks = [];
    for (const dec of d.trace.decisions) {
      if (!checks.includes(dec.check)) checks.push(dec.check);
      const key = String(dec.id);
      if (!decisions.has(key)) decisions.set(key, []);
      decisions.get(key).push(dec);
    }
    const columns = scoreColumns(cands);
    const selected = new Set(d.evidence.map((h) => String(h.id)));
    const cited = new Set(d.cited_ids.map(String));
    const head = el("tr", null, [el("th", { text: "#" }), el("th", { text: "status" }),
      ...columns.map((col) => el("th", { text: col.header })), ...checks.map((c) => el("th", { text: c })),
      el("th", { text: "evidence" })]);
    const body = el("tbody");
    for (const c of cands) {
      const id = String(c.id);
      const decs = decisions.get(id) || [];
      const verdict = candidateStatus(decs, selected.has(id));
      let status = verdict.status;
      if (d.search_only && !decs.length) status = "";
      const label = status === "not-needed" ? "not needed" : status;
      const statusCell = el("td", null, status ? [el("span", { class: "badge " + status, text: label })] : []);
      if (cited.has(id)) statusCell.appendChild(el("span", { class: "badge selected", text: "cited" }));
      if (verdict.why) statusCell.appendChild(el("div", { class: "why", text: verdict.why }));
      const row = el("tr", { id: "cand-" + id, class: status, "data-status": status }, [
        el("td", { class: "num", text: c.rank !== undefined ? c.rank : "" }),
        statusCell,
        ...columns.map((col) => el("td", { class: "num", title: "raw " + fmt(col.raw(c), 4), text: col.value(c) })),
        ...checks.map((check) => {
          const mine = decs.filter((x) => x.check === check);
          const td = el("td");
          for (const x of mine) {
            td.appendChild(el("span", { class: "badge " + verdictClass(x),
              text: verdictLabel(x) + (x.score !== undefined ? " " + fmt(x.score, 2) : "") }));
            if (x.reason) td.appendChild(el("div", { class: "why", text: x.reason }));
          }
          return td;
        }),
        el("td", { class: "text" }, [
          c.title ? el("div", { class: "title", text: c.title }) : null,
          el("div", { text: short(c.text || "", 240) }),
          el("div", { class: "src" }, [sourceLink(c), " · " + [c.domain, id].filter(Boolean).join(" · ")]),
        ]),
      ]);
      body.appendChild(row);
    }
    s.appendChild(el("table", null, [el("thead", null, [head]), body]));
    return s;
  }

  // ---------------------------------------------------------------- value checks and conflicts
  // Values (numbers, dates, names) in the answer that the evidence does not state, from the
  // verifier's records: each claim's value_failures, and any verify event that carries them.
  function valueFailures(d) {
    const rows = [];
    let checked = 0;
    for (const c of d.claims) {
      if (typeof c.values_checked === "number") checked += c.values_checked;
      for (const f of c.value_failures || []) rows.push({ sentence: c.sentence, failure: f });
    }
    for (const ev of d.trace.events) {
      if (ev.stage !== "verify") continue;
      if (typeof ev.values_checked === "number" && !d.claims.length) checked += ev.values_checked;
      for (const f of ev.value_failures || []) {
        if (!rows.some((r) => JSON.stringify(r.failure) === JSON.stringify(f))) rows.push({ sentence: ev.sentence, failure: f });
      }
    }
    return { rows: rows, checked: checked };
  }

  function valueText(v) {
    if (v === undefined || v === null) return "";
    if (typeof v !== "object") return String(v);
    return String(v.text !== undefined ? v.text : (v.value !== undefined ? v.value : JSON.stringify(v)));
  }

  function renderValueChecks(d) {
    const found = valueFailures(d);
    if (!found.rows.length && !found.checked) return null;
    const s = section("Values checked against the evidence", "values");
    s.appendChild(el("p", { class: "meta", text: found.checked + " value" + (found.checked === 1 ? "" : "s") +
      " (numbers, dates, names) checked; " + found.rows.length + " not stated by the evidence" }));
    if (!found.rows.length) return s;
    const body = el("tbody");
    for (const r of found.rows) {
      const f = r.failure;
      const says = f.evidence_says === undefined || f.evidence_says === null
        ? "no value of this kind" : valueText(f.evidence_says);
      body.appendChild(el("tr", { class: "value-failure" }, [
        el("td", { text: valueText(f.value !== undefined ? f.value : f) }),
        el("td", { text: f.kind || (f.value && f.value.kind) || "" }),
        el("td", { text: says }),
        el("td", { class: "text", text: r.sentence || "" }),
      ]));
    }
    s.appendChild(el("table", null, [el("thead", null, [el("tr", null, [
      el("th", { text: "answer says" }), el("th", { text: "kind" }), el("th", { text: "evidence says" }),
      el("th", { text: "sentence" })])]), body]));
    return s;
  }

  function renderConflicts(d) {
    const events = d.trace.events.filter((e) => e.stage === "conflict" && Array.isArray(e.groups));
    if (!events.length) return null;
    const s = section("Conflicting answers in the evidence", "conflicts");
    for (const ev of events) {
      if (ev.message) s.appendChild(el("p", { class: "conflict-message", text: String(ev.message) }));
      if (ev.decision) s.appendChild(el("p", { class: "meta", text: "decision: " + ev.decision }));
      const body = el("tbody");
      for (const g of ev.groups) {
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

  function renderTimings(d) {
    const t = d.trace.timings_ms || {};
    const entries = Object.entries(t).filter(([, v]) => typeof v === "number");
    if (!entries.length) return null;
    const s = section("Timings", "timings");
    const max = Math.max(...entries.map(([, v]) => v), 1e-9);
    const grid = el("div", { class: "bars" });
    for (const [stage, ms] of entries) {
      grid.appendChild(el("span", { text: stage }));
      grid.appendChild(el("div", { class: "bar", style: "width:" + Math.max(0.5, (100 * ms) / max).toFixed(2) + "%", "data-stage": stage }));
      grid.appendChild(el("span", { class: "ms", text: fmt(ms, 1) + " ms" }));
    }
    s.appendChild(grid);
    const calls = ["llm_calls", "prompt_tokens", "completion_tokens"].filter((k) => d.trace[k] !== undefined);
    if (calls.length) s.appendChild(el("p", { class: "meta", text: calls.map((k) => k.replace(/_/g, " ") + ": " + d.trace[k]).join(" · ") }));
    return s;
  }

  function renderEvents(d) {
    const events = d.trace.events.filter((e) => e.stage !== "route");
    if (!events.length) return null;
    const s = section("Stages", "stages");
    for (const ev of events) {
      const summary = el("summary", { text: String(ev.stage || "event") });
      const details = el("details", { class: "event", "data-stage": ev.stage }, [summary, kv(ev, ["stage", "candidates"])]);
      if (Array.isArray(ev.candidates)) details.appendChild(el("p", { class: "meta", text: ev.candidates.length + " candidates (table above)" }));
      s.appendChild(details);
    }
    return s;
  }

  function render(data) {
    const d = normalize(data);
    const root = document.getElementById("result");
    root.textContent = "";
    const head = el("section", { id: "question-head" }, [el("div", { class: "question", text: d.question || d.trace.query || "" })]);
    const meta = el("div", { class: "meta" });
    if (d.pipeline) meta.appendChild(el("span", { text: "pipeline " + d.pipeline }));
    if (typeof d.confidence === "number") meta.appendChild(el("span", { text: "confidence " + fmt(d.confidence, 2) }));
    if (d.index_generation) meta.appendChild(el("span", { text: "index " + d.index_generation }));
    head.appendChild(meta);
    root.appendChild(head);
    if (!d.search_only) root.appendChild(renderAnswer(d));
    const parts = [renderRoute(d), renderConflicts(d), renderValueChecks(d), renderCandidates(d), renderTimings(d), renderEvents(d)];
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

  window.ragsieveRender = render;
  document.addEventListener("DOMContentLoaded", () => {
    const embedded = JSON.parse(document.getElementById("ragsieve-data").textContent || "null");
    if (embedded) {
      render(embedded);
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

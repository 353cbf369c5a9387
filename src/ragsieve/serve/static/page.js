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

  function renderCandidates(d) {
    const cands = candidateList(d);
    if (!cands.length) return null;
    const s = section("Candidates (" + cands.length + ")", "candidates");
    s.appendChild(el("p", { class: "legend", text:
      "In rank order. selected = in the evidence the answer was generated from; dropped = a check removed it " +
      "(which one and why); kept = passed every check but was not selected." }));
    const decisions = new Map();
    const checks = [];
    for (const dec of d.trace.decisions) {
      if (!checks.includes(dec.check)) checks.push(dec.check);
      const key = String(dec.id);
      if (!decisions.has(key)) decisions.set(key, []);
      decisions.get(key).push(dec);
    }
    const scoreKeys = [];
    for (const c of cands) for (const k of Object.keys(c.scores || {})) if (!scoreKeys.includes(k)) scoreKeys.push(k);
    const selected = new Set(d.evidence.map((h) => String(h.id)));
    const cited = new Set(d.cited_ids.map(String));
    const head = el("tr", null, [el("th", { text: "#" }), el("th", { text: "status" }),
      ...scoreKeys.map((k) => el("th", { text: k })), ...checks.map((c) => el("th", { text: c })),
      el("th", { text: "evidence" })]);
    const body = el("tbody");
    for (const c of cands) {
      const id = String(c.id);
      const decs = decisions.get(id) || [];
      const dropped = decs.find((x) => x.verdict === "dropped");
      const flagged = decs.find((x) => x.verdict === "flagged");
      let status = "kept";
      if (selected.has(id)) status = "selected";
      else if (dropped) status = "dropped";
      else if (flagged) status = "flagged";
      if (d.search_only && !decs.length) status = "";
      const statusCell = el("td", null, status ? [el("span", { class: "badge " + status, text: status })] : []);
      if (cited.has(id)) statusCell.appendChild(el("span", { class: "badge selected", text: "cited" }));
      if (dropped && !selected.has(id)) {
        statusCell.appendChild(el("div", { class: "why", text: "by " + dropped.check + ": " + (dropped.reason || "") }));
      }
      const row = el("tr", { id: "cand-" + id, class: status, "data-status": status }, [
        el("td", { class: "num", text: c.rank !== undefined ? c.rank : "" }),
        statusCell,
        ...scoreKeys.map((k) => el("td", { class: "num", text: fmt((c.scores || {})[k]) })),
        ...checks.map((check) => {
          const mine = decs.filter((x) => x.check === check);
          const td = el("td");
          for (const x of mine) {
            const cls = x.verdict === "kept" ? "kept-verdict" : x.verdict;
            td.appendChild(el("span", { class: "badge " + cls, text: x.verdict + (x.score !== undefined ? " " + fmt(x.score, 2) : "") }));
            if (x.reason) td.appendChild(el("div", { class: "why", text: x.reason }));
          }
          return td;
        }),
        el("td", { class: "text" }, [
          c.title ? el("div", { class: "title", text: c.title }) : null,
          el("div", { text: short(c.text || "", 240) }),
          el("div", { class: "src", text: [c.source, c.domain, id].filter(Boolean).join(" · ") }),
        ]),
      ]);
      body.appendChild(row);
    }
    s.appendChild(el("table", null, [el("thead", null, [head]), body]));
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
    for (const part of [renderRoute(d), renderCandidates(d), renderTimings(d), renderEvents(d)]) if (part) root.appendChild(part);
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

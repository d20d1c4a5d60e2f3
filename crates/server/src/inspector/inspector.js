// The ctxlog inspector: a client of the HTTP API like any other (docs/http-api.md).
"use strict";

const $ = (id) => document.getElementById(id);
const state = { conv: null, events: [], timer: null, seqOf: new Map(), ticket: 0 };

function headers() {
  const h = { "content-type": "application/json" };
  const token = $("token").value.trim();
  if (token) h.authorization = "Bearer " + token;
  return h;
}

async function api(method, path, body) {
  const res = await fetch(path, { method, headers: headers(), body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await res.json().catch(() => null);
  if (!res.ok) {
    const e = (data && data.error) || { class: "http", message: res.statusText };
    const err = new Error(e.message);
    err.status = res.status;
    err.detail = e;
    throw err;
  }
  return data;
}

function status(text, isError) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    // Styles through the CSSOM: the page's Content-Security-Policy refuses style attributes.
    if (k === "class") node.className = v;
    else if (k === "style") Object.assign(node.style, v);
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

async function loadConversations() {
  sessionStorage.setItem("ctxlog-token", $("token").value);
  try {
    const list = await api("GET", "/v1/conversations");
    const ul = $("conversations");
    ul.replaceChildren();
    for (const c of list.conversations) {
      const when = c.last_activity_ms ? new Date(c.last_activity_ms).toISOString().replace("T", " ").slice(0, 19) : "empty";
      const line = c.damage ? `damaged: ${c.damage} · ${c.bytes} bytes` : `${c.events} events · ${c.bytes} bytes · ${when}`;
      const b = el("button", { type: "button", "data-name": c.name, class: c.damage ? "damaged" : "" }, c.name, el("br"), el("small", {}, line));
      b.addEventListener("click", () => openConversation(c.name));
      ul.append(el("li", {}, b));
    }
    const damaged = list.conversations.filter((c) => c.damage).length;
    status(`${list.conversations.length} conversation(s)` + (damaged ? `, ${damaged} damaged (POST /v1/conversations/{name}/verify says what was found)` : ""));
  } catch (e) {
    status(e.status === 401 ? "401: enter a valid bearer token" : e.message, true);
  }
}

function describe(ev) {
  switch (ev.kind) {
    case "tool_call": return `${ev.tool}(${JSON.stringify(ev.arguments)}) [${ev.call_id}]`;
    case "tool_result": return `${ev.tool} [${ev.call_id}] ${ev.status}${ev.exit_code != null ? " exit=" + ev.exit_code : ""}${ev.artifact ? " artifact=" + ev.artifact.name : ""}: ${ev.text || ""}`;
    case "system": return JSON.stringify(ev.marker);
    // A provider item stored as given: its format and type; its encrypted parts are not shown.
    case "opaque": return `${ev.format} ${(ev.item && ev.item.type) || "?"}`;
    default: return ev.text || "";
  }
}

async function openConversation(name) {
  state.conv = name;
  for (const b of document.querySelectorAll("#conversations button")) b.classList.toggle("active", b.dataset.name === name);
  $("detail").hidden = false;
  $("conv-title").textContent = name;
  $("hits").replaceChildren();
  $("recall-note").textContent = "";
  const events = [];
  let from = 1;
  let last = 0;
  for (let page = 0; page < 20; page++) {
    const log = await api("GET", `/v1/conversations/${encodeURIComponent(name)}/events?from=${from}&limit=1000`);
    last = log.last_seq;
    events.push(...log.events);
    if (!log.events.length || log.events[log.events.length - 1].seq >= last) break;
    from = log.events[log.events.length - 1].seq + 1;
  }
  state.events = events;
  $("timeline-note").textContent = events.length < last ? `(first ${events.length} of ${last} events)` : `(${events.length} events)`;
  const ol = $("timeline");
  ol.replaceChildren();
  state.seqOf = new Map();
  for (const ev of events) {
    const text = describe(ev);
    const li = el("li", { "data-seq": String(ev.seq) }, el("span", {}, "#" + ev.seq), el("span", { class: "kind" }, ev.kind), el("span", {}, text.length > 240 ? text.slice(0, 240) + "…" : text));
    state.seqOf.set(ev.seq, li);
    ol.append(li);
  }
  const bytes = events.reduce((n, ev) => n + JSON.stringify(ev).length, 0);
  const slider = $("budget-slider");
  slider.max = String(Math.max(4096, Math.ceil((bytes * 1.5 + 2048) / 256) * 256));
  if (Number(slider.value) > Number(slider.max)) slider.value = slider.max;
  await project();
}

function schedule() {
  $("budget-value").value = $("budget-slider").value;
  clearTimeout(state.timer);
  state.timer = setTimeout(project, 120);
}

function inRanges(seq, ranges) {
  return ranges.some((r) => seq >= r.first && seq <= r.last);
}

async function project() {
  if (!state.conv) return;
  const budget = Number($("budget-slider").value);
  $("budget-value").value = String(budget);
  const request = {
    input: $("input").value,
    format: $("format").value,
    tokenizer: $("tokenizer").value,
    policy: $("policy").value,
    [$("unit").value]: budget,
  };
  const err = $("projection-error");
  const kept = $("kept-turns");
  // Only the newest request draws: answers may arrive out of order.
  const ticket = ++state.ticket;
  try {
    const out = await api("POST", `/v1/conversations/${encodeURIComponent(state.conv)}/projection?report=true`, request);
    if (ticket !== state.ticket) return;
    err.hidden = true;
    drawReport(out.report, budget);
  } catch (e) {
    if (ticket !== state.ticket) return;
    err.hidden = false;
    const d = e.detail || {};
    err.textContent = d.class === "over_budget"
      ? `Over budget: the mandatory part alone needs ${d.needed_bytes} bytes / ${d.needed_tokens} tokens.`
      : e.message;
    kept.textContent = "–";
    kept.dataset.kept = "";
    kept.dataset.budget = String(budget);
  }
}

function drawReport(report, budget) {
  const kept = $("kept-turns");
  kept.textContent = String(report.turns.kept);
  kept.dataset.kept = String(report.turns.kept);
  kept.dataset.budget = String(budget);
  $("total-turns").textContent = String(report.turns.total);
  $("body-bytes").textContent = String(report.bytes);
  $("body-tokens").textContent = String(report.tokens);
  for (const [seq, li] of state.seqOf) {
    li.classList.toggle("kept", inRanges(seq, report.kept));
    li.classList.toggle("dropped", inRanges(seq, report.dropped));
  }
  // Show where the kept history starts (the timeline is oldest first).
  const firstKept = document.querySelector("#timeline li.kept");
  if (firstKept) $("timeline").scrollTop = Math.max(0, firstKept.offsetTop - 60);
  const bar = $("tiers");
  const legend = $("tier-legend");
  bar.replaceChildren();
  legend.replaceChildren();
  const limit = $("unit").value === "max_bytes" ? budget : report.bytes;
  for (const t of report.tiers) {
    const share = Math.max(0, (100 * t.bytes) / Math.max(limit, report.bytes, 1));
    bar.append(el("div", { class: "t-" + t.tier, style: { width: `${share}%` }, title: `${t.tier}: ${t.bytes} bytes, ${t.tokens} tokens, ${t.items} item(s)` }));
    legend.append(el("li", { "data-tier": t.tier }, el("span", { class: "t-" + t.tier }), `${t.tier} ${t.bytes} B / ${t.tokens} tok`));
  }
  const drops = $("drops");
  drops.replaceChildren();
  for (const d of report.drops) drops.append(el("li", {}, `${d.tier} #${d.seqs.first}–${d.seqs.last}: ${d.reason}`));
  for (const c of report.clips) drops.append(el("li", {}, `clipped #${c.seq}: kept ${c.kept_chars} of ${c.chars} chars (${c.recall})`));
  if (report.recall && report.recall.unavailable) drops.append(el("li", {}, "recall unavailable: " + report.recall.unavailable));
}

async function recall(event) {
  event.preventDefault();
  if (!state.conv) return;
  const ol = $("hits");
  ol.replaceChildren();
  try {
    const result = await api("POST", `/v1/conversations/${encodeURIComponent(state.conv)}/recall`, { query: $("query").value, limit: 10 });
    $("recall-note").textContent = result.note;
    for (const h of result.hits) {
      const prov = `seq ${h.seq} · ${h.kind}${h.tool ? " · " + h.tool : ""}${h.status ? " · " + h.status : ""} · page ${h.page + 1}/${h.pages} · chars ${h.char_start}–${h.char_end} · score ${Number(h.score).toPrecision(3)}`;
      ol.append(el("li", { "data-seq": String(h.seq) }, el("div", { class: "prov" }, prov), el("div", {}, h.text.length > 400 ? h.text.slice(0, 400) + "…" : h.text)));
    }
  } catch (e) {
    $("recall-note").textContent = e.message;
  }
}

$("token").value = sessionStorage.getItem("ctxlog-token") || "";
$("reload").addEventListener("click", loadConversations);
$("budget-slider").addEventListener("input", schedule);
for (const id of ["format", "tokenizer", "unit", "policy", "input"]) $(id).addEventListener("change", project);
$("recall-form").addEventListener("submit", recall);
loadConversations();

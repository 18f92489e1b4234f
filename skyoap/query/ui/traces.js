// Traces: search by service, trace id, duration, state and tags; the list;
// a trace as a waterfall of every span across its services, with the
// chosen span's tags and logs, and the trace's logs beside it.

import { gql } from "/ui/api.js";

const TRACES = `query ($condition: TraceQueryCondition) {
  data: queryBasicTraces(condition: $condition) { traces { segmentId endpointNames duration start isError traceIds } }
}`;
const TRACE = `query ($traceId: ID!) {
  trace: queryTrace(traceId: $traceId) {
    spans { traceId segmentId spanId parentSpanId refs { parentSegmentId parentSpanId type }
      serviceCode serviceInstanceName startTime endTime endpointName type peer component isError layer
      tags { key value } logs { time data { key value } } }
  }
}`;
const LOGS = `query ($condition: LogQueryCondition) {
  queryLogs(condition: $condition) { logs { serviceName endpointName timestamp contentType content } }
}`;

const el = (tag, props = {}, ...children) => {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
};

function condition(state) {
  const p = state.params;
  const c = { traceState: p.get("state") || "ALL", queryOrder: "BY_START_TIME", paging: { pageNum: 1, pageSize: 50 } };
  if (p.get("traceId")) c.traceId = p.get("traceId");
  else c.queryDuration = state.duration;
  if (p.get("service")) c.serviceId = p.get("service");
  if (p.get("min")) c.minTraceDuration = Number(p.get("min"));
  if (p.get("max")) c.maxTraceDuration = Number(p.get("max"));
  const tags = (p.get("tags") || "").split(",").map((t) => t.trim()).filter(Boolean);
  if (tags.length) c.tags = tags.map((t) => ({ key: t.split("=")[0], value: t.slice(t.indexOf("=") + 1) }));
  return c;
}

function searchForm(state, services) {
  const p = state.params;
  const field = (name, placeholder) => el("input", { name, placeholder, value: p.get(name) || "" });
  const service = el("select", { name: "service" }, el("option", { value: "", textContent: "every service" }));
  for (const s of services) service.append(el("option", { value: s.id, textContent: s.name, selected: s.id === p.get("service") }));
  const status = el("select", { name: "state" });
  for (const s of ["ALL", "SUCCESS", "ERROR"]) status.append(el("option", { value: s, textContent: s.toLowerCase(), selected: s === (p.get("state") || "ALL") }));
  const form = el("form", { className: "search" }, service, field("traceId", "trace id"), field("tags", "tags: http.method=GET,…"),
    field("min", "min ms"), field("max", "max ms"), status, el("button", { textContent: "Search" }));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const data = new FormData(form);
    state.set({ ...Object.fromEntries(data.entries()), trace: null });
  });
  return form;
}

export async function traces(page, state) {
  const [{ services }, { data }] = await Promise.all([
    gql('query { services: listServices(layer: "GENERAL") { id name } }'),
    gql(TRACES, { condition: condition(state) }),
  ]);
  const list = el("table", { className: "traces" });
  list.createTHead().insertRow().append(...["Endpoint", "Start", "Duration (ms)", "Trace"].map((t) => el("th", { textContent: t })));
  const body = list.createTBody();
  for (const t of data.traces) {
    const row = body.insertRow();
    row.className = t.isError ? "failed" : "";
    row.dataset.trace = t.traceIds[0];
    row.append(
      el("td", { textContent: t.endpointNames.join(", ") }),
      el("td", { textContent: new Date(Number(t.start)).toISOString().replace("T", " ").slice(0, 19) }),
      el("td", { className: "number", textContent: String(t.duration) }),
      el("td", {}, el("a", { href: "#", textContent: t.traceIds[0] })),
    );
    row.addEventListener("click", (e) => {
      e.preventDefault();
      state.set({ trace: t.traceIds[0] });
    });
  }
  const view = el("section", { className: "trace" });
  page.replaceChildren(searchForm(state, services), el("div", { className: "split" }, list, view));
  if (!data.traces.length) list.after(el("p", { textContent: "No trace matches." }));
  const chosen = state.params.get("trace");
  if (chosen) await showTrace(view, chosen, state);
}

async function showTrace(view, traceId, state) {
  const [{ trace }, { queryLogs }] = await Promise.all([
    gql(TRACE, { traceId }),
    gql(LOGS, { condition: { relatedTrace: { traceId }, paging: { pageNum: 1, pageSize: 100 } } }),
  ]);
  const spans = trace.spans;
  const first = Math.min(...spans.map((s) => s.startTime));
  const total = Math.max(1, Math.max(...spans.map((s) => s.endTime)) - first);
  const detail = el("div", { className: "span-detail" });
  const rows = el("div", { className: "waterfall" });
  const depth = depths(spans);
  for (const s of spans) {
    const bar = el("div", { className: "bar" + (s.isError ? " failed" : "") });
    bar.style.left = `${((s.startTime - first) / total) * 100}%`;
    bar.style.width = `${Math.max(0.3, ((s.endTime - s.startTime) / total) * 100)}%`;
    const label = el("div", { className: "label", textContent: `${s.serviceCode}  ${s.endpointName}` });
    label.style.paddingLeft = `${depth.get(key(s)) * 0.8}rem`;
    const row = el("div", { className: "span" }, label, el("div", { className: "track" }, bar),
      el("div", { className: "number", textContent: `${s.endTime - s.startTime} ms` }));
    row.dataset.service = s.serviceCode;
    row.addEventListener("click", () => detail.replaceChildren(...spanDetail(s)));
    rows.append(row);
  }
  const logs = el("ul", { className: "logs" }, ...queryLogs.logs.map((l) =>
    el("li", { textContent: `${new Date(Number(l.timestamp)).toISOString()}  ${l.serviceName}  ${l.content}` })));
  view.replaceChildren(el("h2", { textContent: `Trace ${traceId}` }), rows, detail, el("h3", { textContent: "Logs" }), logs);
}

const key = (s) => `${s.segmentId}/${s.spanId}`;

// Each span's depth in the trace's tree: a span's parent is the span before
// it in its segment, or the span its reference names in another segment.
function depths(spans) {
  const depth = new Map();
  for (const s of spans) {
    const ref = s.refs[0];
    const parent = s.parentSpanId >= 0 ? `${s.segmentId}/${s.parentSpanId}` : ref ? `${ref.parentSegmentId}/${ref.parentSpanId}` : null;
    depth.set(key(s), parent && depth.has(parent) ? depth.get(parent) + 1 : 0);
  }
  return depth;
}

function spanDetail(s) {
  const facts = [["service", s.serviceCode], ["instance", s.serviceInstanceName], ["endpoint", s.endpointName],
    ["type", s.type], ["peer", s.peer], ["component", s.component], ["layer", s.layer], ["error", String(s.isError)],
    ...s.tags.map((t) => [t.key, t.value])];
  const list = el("dl", {}, ...facts.flatMap(([k, v]) => [el("dt", { textContent: k }), el("dd", { textContent: v || "–" })]));
  const logs = s.logs.map((l) => el("pre", { textContent: `${new Date(Number(l.time)).toISOString()} ${l.data.map((d) => `${d.key}=${d.value}`).join(" ")}` }));
  return [list, ...logs];
}

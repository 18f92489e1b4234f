// Traces: search by service, instance, endpoint, trace id, duration, state
// and tags; the list; a trace as a waterfall of every span across its
// services, with the chosen span's tags and logs, and the trace's logs.

import { gql } from "/ui/api.js";
import { el, select, time, when } from "/ui/dom.js";
import { LOGS } from "/ui/logs.js";
import { entityCondition, entityPickers, input, searchForm, searchedTags } from "/ui/search.js";

const TRACES = `query ($condition: TraceQueryCondition) {
  data: queryBasicTraces(condition: $condition) { traces { segmentId endpointNames duration start isError traceIds } }
}`;
const TRACE = `query ($traceId: ID!) {
  trace: queryTrace(traceId: $traceId) {
    spans { traceId segmentId spanId parentSpanId refs { parentSegmentId parentSpanId type }
      serviceCode serviceInstanceName startTime endTime endpointName type peer component isError layer
      tags { key value } logs { time data { key value } } depth }
  }
}`;
const PAGE_SIZE = 50;

function condition(state) {
  const p = state.params;
  const c = { traceState: p.get("state") || "ALL", queryOrder: p.get("order") || "BY_START_TIME",
    paging: { pageNum: 1, pageSize: PAGE_SIZE }, ...entityCondition(p) };
  if (p.get("traceId")) c.traceId = p.get("traceId");
  else c.queryDuration = state.duration;
  if (p.get("min")) c.minTraceDuration = Number(p.get("min"));
  if (p.get("max")) c.maxTraceDuration = Number(p.get("max"));
  const tags = searchedTags(p, "http.status_code=500");
  if (tags.length) c.tags = tags;
  return c;
}

export async function traces(page, state) {
  const p = state.params;
  const [pickers, { data }] = await Promise.all([entityPickers(state), gql(TRACES, { condition: condition(state) })]);
  const form = searchForm(state, [...pickers, input(state, "traceId", "trace id"), input(state, "tags", "tags: http.method=GET, …"),
    input(state, "min", "min ms"), input(state, "max", "max ms"),
    select("state", [["ALL", "every state"], ["SUCCESS", "succeeded"], ["ERROR", "failed"]], p.get("state") || "ALL"),
    select("order", [["BY_START_TIME", "newest first"], ["BY_DURATION", "slowest first"]], p.get("order") || "BY_START_TIME")]);
  const longest = Math.max(1, ...data.traces.map((t) => t.duration));
  const list = el("ol", { className: "trace-list" }, ...data.traces.map((t) => {
    const item = el("li", { className: (t.isError ? "failed" : "") + (t.traceIds[0] === p.get("trace") ? " chosen" : "") },
      el("a", { href: `#/traces?${new URLSearchParams({ ...Object.fromEntries(p), trace: t.traceIds[0] })}`, textContent: t.endpointNames.join(", ") || "(no endpoint)" }),
      el("span", { className: "meta", textContent: `${time(t.start)} · ${t.duration} ms` }),
      el("span", { className: "duration" }));
    item.dataset.trace = t.traceIds[0];
    item.lastChild.style.width = `${(t.duration / longest) * 100}%`;
    return item;
  }));
  const view = el("section", { className: "trace" }, el("p", { className: "empty", textContent: "Choose a trace to see its spans." }));
  page.replaceChildren(form, el("div", { className: "split" },
    el("div", {}, list, when(!data.traces.length, () => el("p", { className: "empty", textContent: "No trace matches." })),
      when(data.traces.length === PAGE_SIZE, () => el("p", { className: "meta", textContent: `The first ${PAGE_SIZE} shown: narrow the search for others.` }))), view));
  if (p.get("trace")) await showTrace(view, p.get("trace"));
}

async function showTrace(view, traceId) {
  const [{ trace }, { queryLogs }] = await Promise.all([
    gql(TRACE, { traceId }),
    gql(LOGS, { condition: { relatedTrace: { traceId }, paging: { pageNum: 1, pageSize: 100 } } }),
  ]);
  const spans = trace.spans;
  if (!spans.length) {
    view.replaceChildren(el("p", { className: "empty", textContent: `No trace has the id ${traceId}.` }));
    return;
  }
  const first = Math.min(...spans.map((s) => s.startTime));
  const total = Math.max(1, Math.max(...spans.map((s) => s.endTime)) - first);
  const detail = el("div", { className: "span-detail" });
  const rows = el("div", { className: "waterfall" });
  for (const s of spans) {
    const bar = el("div", { className: "bar" + (s.isError ? " failed" : "") });
    bar.style.left = `${((s.startTime - first) / total) * 100}%`;
    bar.style.width = `${Math.max(0.3, ((s.endTime - s.startTime) / total) * 100)}%`;
    const label = el("div", { className: "label", textContent: `${s.serviceCode}  ${s.endpointName}` });
    label.style.paddingLeft = `${s.depth * 0.8}rem`;
    const row = el("div", { className: "span" }, label, el("div", { className: "track" }, bar),
      el("div", { className: "number", textContent: `${s.endTime - s.startTime} ms` }));
    row.dataset.service = s.serviceCode;
    row.addEventListener("click", () => detail.replaceChildren(...spanDetail(s)));
    rows.append(row);
  }
  const logs = el("ul", { className: "trace-logs" }, ...queryLogs.logs.map((l) =>
    el("li", { textContent: `${time(l.timestamp)}  ${l.serviceName}  ${l.content}` })));
  detail.replaceChildren(...spanDetail(spans[0]));
  const services = new Set(spans.map((s) => s.serviceCode)).size;
  view.replaceChildren(el("h2", { textContent: `Trace ${traceId}` }),
    el("p", { className: "meta", textContent: `${spans.length} spans across ${services} services, ${total} ms` }),
    rows, detail, el("h3", { textContent: "Logs" }), when(!queryLogs.logs.length, () => el("p", { className: "empty", textContent: "No log of this trace." })), logs);
}

function spanDetail(s) {
  const facts = [["service", s.serviceCode], ["instance", s.serviceInstanceName], ["endpoint", s.endpointName],
    ["type", s.type], ["peer", s.peer], ["component", s.component], ["layer", s.layer], ["error", String(s.isError)],
    ...s.tags.map((t) => [t.key, t.value])];
  const list = el("dl", {}, ...facts.flatMap(([k, v]) => [el("dt", { textContent: k }), el("dd", { textContent: v || "–" })]));
  const logs = s.logs.map((l) => el("pre", { textContent: `${time(l.time)} ${l.data.map((d) => `${d.key}=${d.value}`).join(" ")}` }));
  return [list, ...logs];
}

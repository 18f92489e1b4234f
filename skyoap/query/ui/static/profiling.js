// Profiling: a task created on an endpoint of a service (its agents dump the
// thread stack of its slow requests), the service's tasks with what each
// instance logged, the segments a task profiled, and a segment's stack tree
// as a flame graph or an indented table, each frame with its time, its time
// without its children and its dumps.

import { gql, QueryError } from "/ui/api.js";
import { el, select, time, when } from "/ui/dom.js";

const TASKS = `query ($s: ID) { tasks: getProfileTaskList(serviceId: $s) {
  id serviceName endpointName startTime duration minDurationThreshold dumpPeriod maxSamplingCount
  logs { instanceName operationType operationTime } } }`;
const SEGMENTS = `query ($t: ID!) { segments: getProfileTaskSegments(taskID: $t) {
  traceId instanceName endpointNames duration start spans { segmentId startTime endTime profiled } } }`;
const ANALYZE = `query ($q: [SegmentProfileAnalyzeQuery!]!) { analysis: getSegmentsProfileAnalyze(queries: $q) {
  tip trees { elements { id parentId codeSignature duration durationChildExcluded count } } } }`;
const CREATE = `mutation ($r: ProfileTaskCreationRequest) { task: createProfileTask(creationRequest: $r) { id errorReason } }`;
const SETTINGS = [["minutes", "minutes", 5], ["min", "min ms", 0], ["period", "dump every ms", 10], ["samples", "requests", 5]];

export async function profiling(page, state) {
  const p = state.params;
  const [form, { tasks }] = await Promise.all([creation(state), gql(TASKS, { s: p.get("service") || null })]);
  const list = el("ol", { className: "trace-list tasks" }, ...tasks.map((t) => {
    const logs = t.logs.map((g) => `${g.instanceName} ${g.operationType.toLowerCase().replace("_", " ")} ${time(g.operationTime)}`);
    const item = el("li", { className: t.id === p.get("task") ? "chosen" : "" },
      el("a", { href: `#/profiling?${new URLSearchParams({ ...Object.fromEntries(p), task: t.id, segment: "" })}`,
        textContent: `${t.serviceName} ${t.endpointName}` }),
      el("span", { className: "meta", textContent: `${time(t.startTime)} · ${t.duration} min · dumps every ${t.dumpPeriod} ms past ${t.minDurationThreshold} ms · ${t.maxSamplingCount} requests` }),
      el("span", { className: "meta", textContent: logs.join(" · ") || "no agent has it yet" }));
    item.dataset.task = t.id;
    return item;
  }));
  const view = el("section", { className: "profile" }, el("p", { className: "empty", textContent: "Choose a task to see the requests it profiled." }));
  page.replaceChildren(form, el("div", { className: "split" },
    el("div", {}, list, when(!tasks.length, () => el("p", { className: "empty", textContent: "No profiling task." }))), view));
  if (p.get("task")) await showTask(view, state);
}

// The form that creates a task on an endpoint of the chosen service.
async function creation(state) {
  const p = state.params;
  const id = p.get("service");
  const { services } = await gql('query { services: listServices(layer: "GENERAL") { id name } }');
  const { endpoints } = id ? await gql(`query ($id: ID!) { endpoints: findEndpoint(serviceId: $id, keyword: "", limit: 100) { name } }`, { id })
    : { endpoints: [] };
  const service = select("service", [["", "every service"], ...services.map((s) => [s.id, s.name])], id);
  service.addEventListener("change", () => state.set({ service: service.value, task: null, segment: null }));
  const endpoint = el("input", { name: "endpoint", placeholder: "endpoint", value: p.get("endpoint") || "" });
  endpoint.setAttribute("list", "profiled-endpoints");
  const known = el("datalist", { id: "profiled-endpoints" }, ...endpoints.map((e) => el("option", { value: e.name })));
  const settings = SETTINGS.map(([name, label, value]) => el("label", {}, `${label} `, el("input", { name, type: "number", value, className: "short" })));
  const form = el("form", { className: "search" }, service, endpoint, known, ...settings, el("button", { textContent: "Profile", disabled: !id }));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const v = Object.fromEntries(new FormData(form).entries());
    const { task } = await gql(CREATE, { r: { serviceId: id, endpointName: v.endpoint, duration: Number(v.minutes),
      minDurationThreshold: Number(v.min), dumpPeriod: Number(v.period), maxSamplingCount: Number(v.samples) } });
    if (task.errorReason) {
      form.after(el("p", { className: "error", textContent: `No task: ${task.errorReason}` }));
      return;
    }
    state.set({ task: task.id, segment: null, endpoint: v.endpoint });
  });
  return form;
}

async function showTask(view, state) {
  const p = state.params;
  const { segments } = await gql(SEGMENTS, { t: p.get("task") });
  const rows = segments.map((s) => {
    const profiled = s.spans.filter((x) => x.profiled);
    const segmentId = profiled[0]?.segmentId ?? "";
    const row = el("tr", { className: segmentId === p.get("segment") ? "chosen" : "" },
      el("td", {}, el("a", { href: `#/profiling?${new URLSearchParams({ ...Object.fromEntries(p), segment: segmentId })}`, textContent: s.endpointNames.join(", ") })),
      el("td", { textContent: s.instanceName }), el("td", { textContent: time(Number(s.start)) }),
      el("td", { className: "number", textContent: `${s.duration} ms` }),
      el("td", {}, el("a", { href: `#/traces?trace=${encodeURIComponent(s.traceId)}`, textContent: "trace" })));
    row.dataset.segment = segmentId;
    return row;
  });
  const table = el("table", { className: "segments" }, el("thead", {}, el("tr", {}, ...["endpoint", "instance", "start", "duration", ""].map((h) => el("th", { textContent: h })))),
    el("tbody", {}, ...rows));
  view.replaceChildren(el("h2", { textContent: "Profiled requests" }),
    segments.length ? table : el("p", { className: "empty", textContent: "No request profiled yet: the agents dump requests of the endpoint that run past the task's threshold." }));
  const chosen = segments.find((s) => s.spans.some((x) => x.profiled && x.segmentId === p.get("segment")));
  if (chosen) view.append(await analysis(chosen, state));
}

async function analysis(segment, state) {
  const spans = segment.spans.filter((x) => x.profiled);
  const range = { start: Math.min(...spans.map((x) => x.startTime)), end: Math.max(...spans.map((x) => x.endTime)) };
  const { analysis } = await gql(ANALYZE, { q: [{ segmentId: spans[0].segmentId, timeRange: range }] });
  const flame = state.params.get("view") !== "table";
  const toggle = el("p", { className: "views" }, ...[["flame", "flame graph"], ["table", "table"]].map(([view, text]) =>
    el("a", { href: `#/profiling?${new URLSearchParams({ ...Object.fromEntries(state.params), view })}`, textContent: text,
      className: (view === "table") !== flame ? "current" : "" })));
  const trees = analysis.trees.map((tree) => (flame ? flameGraph(tree.elements) : indented(tree.elements)));
  return el("div", { className: "analysis" }, el("h2", { textContent: "Where the time went" }), toggle,
    when(analysis.tip, () => el("p", { className: "meta", textContent: analysis.tip })), ...trees);
}

function childrenOf(elements) {
  const children = new Map();
  for (const e of elements) children.set(e.parentId, [...(children.get(e.parentId) ?? []), e]);
  return children;
}

const frameText = (e) => `${e.codeSignature}\n${e.duration} ms, ${e.durationChildExcluded} ms itself, ${e.count} dumps`;

// Each frame a bar as wide as its share of the outermost frame's time (of its
// dumps, where no time passed between them), its children below it.
function flameGraph(elements) {
  const children = childrenOf(elements);
  const [root] = children.get("0") ?? [];
  if (!root) throw new QueryError("the analysis has a tree with no outermost frame");
  const size = (e) => (root.duration ? e.duration : e.count);
  const whole = Math.max(1, size(root));
  const graph = el("div", { className: "flame" });
  let depth = 0;
  const place = (e, left, level) => {
    depth = Math.max(depth, level);
    const bar = el("div", { className: "frame", title: frameText(e), textContent: `${e.duration} ms  ${e.codeSignature}` });
    Object.assign(bar.style, { left: `${(left / whole) * 100}%`, width: `${(size(e) / whole) * 100}%`, top: `${level * 1.4}rem` });
    Object.assign(bar.dataset, { signature: e.codeSignature, duration: e.duration, self: e.durationChildExcluded, count: e.count });
    graph.append(bar);
    let next = left;
    for (const child of children.get(e.id) ?? []) {
      place(child, next, level + 1);
      next += size(child);
    }
  };
  place(root, 0, 0);
  graph.style.height = `${(depth + 1) * 1.4}rem`;
  return graph;
}

// The frames depth first, each indented under its parent, with their times.
function indented(elements) {
  const children = childrenOf(elements);
  const rows = [];
  const walk = (e, depth) => {
    const code = el("td", { className: "code", textContent: e.codeSignature });
    code.style.paddingLeft = `${0.6 + depth}rem`;
    const row = el("tr", {}, code, ...[e.duration, e.durationChildExcluded, e.count].map((n) => el("td", { className: "number", textContent: String(n) })));
    row.dataset.signature = e.codeSignature;
    rows.push(row);
    for (const child of children.get(e.id) ?? []) walk(child, depth + 1);
  };
  for (const root of children.get("0") ?? []) walk(root, 0);
  return el("table", { className: "frames" }, el("thead", {}, el("tr", {}, ...["code", "ms", "self ms", "dumps"].map((h) => el("th", { textContent: h })))),
    el("tbody", {}, ...rows));
}

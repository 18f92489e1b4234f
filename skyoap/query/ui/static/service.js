// A service's dashboard: its load, latency with percentiles, success rate
// and apdex over the window, its events marked on them and listed, its
// slowest database statements; its instances and endpoints (each opening
// its page), busiest first
// (or slowest, by a click on a heading); the services it calls and that
// call it.

import { expressions, gql, pointAt, series, single } from "/ui/api.js";
import { lineChart, sparkline } from "/ui/chart.js";
import { el, figure, sortable } from "/ui/dom.js";
import { endpointLink } from "/ui/endpoint.js";
import { eventsTable, serviceEvents } from "/ui/events.js";
import { callFigures, judged } from "/ui/relations.js";


const CHARTS = [
  ["Load (calls / min)", "service_cpm"],
  ["Latency (ms)", "service_resp_time"],
  ["Success (%)", "service_sla/100"],
  ["Apdex", "service_apdex/10000"],
];
const PERCENTILES = "service_percentile{p='50,75,90,95,99'}";
const SLOW_STATEMENTS = "top_n(top_n_service_database_statement,10,des)";
const FIGURES = [["Load", "cpm"], ["Latency (ms)", "resp_time"], ["Success (%)", "sla/100"]];

export async function service(page, state) {
  const id = state.params.get("id");
  const { service: s } = await gql("query ($id: String!) { service: getService(serviceId: $id) { id name } }", { id });
  if (!s) {
    page.textContent = `No service has the id ${id}.`;
    return;
  }
  const entity = { serviceName: s.name, normal: true };
  const d = state.duration;
  const [{ pods: instances }, { pods: endpoints }, { t }] = await Promise.all([
    gql("query ($id: ID!, $d: Duration!) { pods: listInstances(duration: $d, serviceId: $id) { name } }", { id, d }),
    gql('query ($id: ID!) { pods: findEndpoint(serviceId: $id, keyword: "", limit: 100) { name } }', { id }),
    gql("query ($id: ID!, $d: Duration!) { t: getServiceTopology(serviceId: $id, duration: $d) { nodes { id name isReal } calls { id source target detectPoints } } }", { id, d }),
  ]);
  const list = async (kind, names, prefix, named) => {
    const asked = names.flatMap((n) => FIGURES.map(([, f]) => [`avg(${prefix}_${f})`, { ...entity, [named]: n }]).concat([[`${prefix}_cpm`, { ...entity, [named]: n }]]));
    const results = await expressions(asked, d);
    const per = FIGURES.length + 1;
    const rows = names.map((n, i) => ({ n, figures: FIGURES.map((_, j) => single(results[i * per + j])), trend: series(results[i * per + FIGURES.length]) }));
    rows.sort((a, b) => (b.figures[0] ?? -1) - (a.figures[0] ?? -1));
    const table = el("table", { className: kind });
    table.createTHead().insertRow().append(...[kind === "instances" ? "Instance" : "Endpoint", ...FIGURES.map(([f]) => f), "Load over the window"].map((x) => el("th", { textContent: x })));
    const body = table.createTBody();
    for (const r of rows) {
      const tr = body.insertRow();
      tr.dataset.name = r.n;
      const named = kind === "endpoints" ? endpointLink(id, r.n) : r.n;
      tr.append(el("td", {}, named), ...r.figures.map((f) => el("td", { className: "number", textContent: figure(f) })), el("td", {}, sparkline(r.trend)));
      r.figures.forEach((f, j) => (tr.cells[j + 1].dataset.value = f ?? ""));
    }
    return sortable(table);
  };
  const [charts, instancesTable, endpointsTable, figures, events] = await Promise.all([
    expressions([...CHARTS.map(([, e]) => [e, entity]), [PERCENTILES, entity], [SLOW_STATEMENTS, entity]], d),
    list("instances", instances.map((i) => i.name), "service_instance", "serviceInstanceName"),
    list("endpoints", endpoints.map((e) => e.name), "endpoint", "endpointName"),
    callFigures(t, d),
    serviceEvents(s.name, d),
  ]);
  const grid = el("div", { className: "charts" });
  const times = [d.start, d.end];
  // Each event marked where it started (or, reported ended only, where it ended).
  const marks = events.map((e) => ({ at: pointAt(d, e.startTime || e.endTime), label: e.name, kind: e.type.toLowerCase() }));
  const chart = (title, lines) => el("figure", {}, el("figcaption", { textContent: title }), lineChart(lines, times, marks));
  CHARTS.forEach(([title], i) => grid.append(chart(title, [{ name: title, points: series(charts[i]) }])));
  const percentiles = charts[CHARTS.length].results.map((r) => ({ name: `p${r.metric.labels[0]?.value}`, points: r.values.map((v) => (v.value == null ? null : Number(v.value))) }));
  grid.append(chart("Latency percentiles (ms)", percentiles));

  const names = new Map(t.nodes.map((n) => [n.id, n]));
  const relations = (mine) => {
    const table = el("table", { className: "relations" });
    table.createTHead().insertRow().append(...["Call", "Calls / min", "Latency (ms)", "Success (%)"].map((x) => el("th", { textContent: x })));
    const body = table.createTBody();
    for (const c of t.calls.filter(mine)) {
      const [from, to] = [names.get(c.source), names.get(c.target)];
      const other = c.source === id ? to : from;
      const link = other.isReal ? el("a", { href: `#/service?id=${encodeURIComponent(other.id)}`, textContent: other.name }) : el("span", { textContent: other.name });
      const f = judged(figures.get(c.id));
      const row = body.insertRow();
      row.dataset.call = `${from.name} → ${to.name}`;
      row.append(el("td", {}, ...(c.source === id ? [`${s.name} → `, link] : [link, ` → ${s.name}`])),
        ...[f.cpm, f.respTime, f.sla].map((v) => el("td", { className: "number", textContent: figure(v) })));
    }
    return table;
  };
  const slow = el("table", { className: "slow" });
  slow.createTHead().insertRow().append(...["Latency (ms)", "Statement", "Trace"].map((x) => el("th", { textContent: x })));
  const slowRows = slow.createTBody();
  for (const v of charts[CHARTS.length + 1].results[0]?.values ?? []) {
    const row = slowRows.insertRow();
    row.dataset.trace = v.traceID;
    row.append(el("td", { className: "number", textContent: v.value }), el("td", {}, el("code", { textContent: v.id })),
      el("td", {}, el("a", { href: `#/traces?trace=${encodeURIComponent(v.traceID)}`, textContent: v.traceID })));
  }
  page.replaceChildren(
    el("h1", { textContent: s.name }), grid,
    el("h2", { textContent: "Events" }), events.length ? eventsTable(events) : el("p", { className: "empty", textContent: "No event in the window." }),
    ...(slowRows.rows.length ? [el("h2", { textContent: "Slowest database statements" }), slow] : []),
    el("h2", { textContent: "Instances" }), instancesTable,
    el("h2", { textContent: "Endpoints" }), endpointsTable,
    el("h2", { textContent: "Calls it makes" }), relations((c) => c.source === id),
    el("h2", { textContent: "Calls it serves" }), relations((c) => c.target === id),
  );
}

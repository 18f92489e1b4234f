// Services: every service with its load, latency, success rate and apdex
// over the window, sortable, filterable by name.

import { expressions, gql, series, single } from "/ui/api.js";
import { sparkline } from "/ui/chart.js";
import { figure } from "/ui/dom.js";

const COLUMNS = [
  { key: "name", title: "Service" },
  { key: "cpm", title: "Load (calls / min)", expression: "avg(service_cpm)" },
  { key: "respTime", title: "Latency (ms)", expression: "avg(service_resp_time)" },
  { key: "sla", title: "Success (%)", expression: "avg(service_sla)/100" },
  { key: "apdex", title: "Apdex", expression: "avg(service_apdex)/10000" },
];

export async function services(page, state) {
  const listed = await gql('query { services: listServices(layer: "GENERAL") { id name normal } }');
  const asked = [];
  for (const s of listed.services) {
    const entity = { serviceName: s.name, normal: s.normal };
    for (const c of COLUMNS.slice(1)) asked.push([c.expression, entity]);
    asked.push(["service_cpm", entity]);
  }
  const results = await expressions(asked, state.duration);
  const per = COLUMNS.length;  // the averages and the series of each service
  const rows = listed.services.map((s, n) => {
    const row = { id: s.id, name: s.name, trend: series(results[n * per + per - 1]) };
    COLUMNS.slice(1).forEach((c, i) => (row[c.key] = single(results[n * per + i])));
    return row;
  });
  render(page, rows, state);
}

function render(page, rows, state) {
  const sortBy = state.params.get("sort") || "name";
  const filter = (state.params.get("q") || "").toLowerCase();
  const shown = rows
    .filter((r) => r.name.toLowerCase().includes(filter))
    .sort((a, b) => (sortBy === "name" ? a.name.localeCompare(b.name) : (b[sortBy] ?? -1) - (a[sortBy] ?? -1)));
  const search = document.createElement("input");
  search.type = "search";
  search.placeholder = "filter by name";
  search.value = state.params.get("q") || "";
  search.addEventListener("change", () => state.set({ q: search.value }));
  const table = document.createElement("table");
  table.className = "services";
  const head = table.createTHead().insertRow();
  for (const c of [...COLUMNS, { key: "trend", title: "Load over the window" }]) {
    const th = document.createElement("th");
    th.textContent = c.title;
    if (c.key !== "trend") {
      th.className = "sortable" + (c.key === sortBy ? " sorted" : "");
      th.addEventListener("click", () => state.set({ sort: c.key }));
    }
    head.appendChild(th);
  }
  const body = table.createTBody();
  for (const r of shown) {
    const tr = body.insertRow();
    tr.dataset.service = r.name;
    const link = document.createElement("a");
    link.href = `#/service?id=${encodeURIComponent(r.id)}`;
    link.textContent = r.name;
    tr.insertCell().appendChild(link);
    for (const c of COLUMNS.slice(1)) {
      const td = tr.insertCell();
      td.className = "number";
      td.dataset.column = c.key;
      td.textContent = figure(r[c.key]);
    }
    tr.insertCell().appendChild(sparkline(r.trend));
  }
  page.replaceChildren(search, table);
  if (!rows.length) page.append(Object.assign(document.createElement("p"), { textContent: "No service has reported yet." }));
}

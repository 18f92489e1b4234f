// Services: every service with its load, latency, success rate and apdex
// over the window, sortable by each, filtered by name. The list is shown at
// once, and each service's figures as they come.

import { expressions, gql, series, single } from "/ui/api.js";
import { sparkline } from "/ui/chart.js";
import { el, figure, sortable, when } from "/ui/dom.js";

const COLUMNS = [
  { key: "cpm", title: "Load (calls / min)", expression: "avg(service_cpm)" },
  { key: "respTime", title: "Latency (ms)", expression: "avg(service_resp_time)" },
  { key: "sla", title: "Success (%)", expression: "avg(service_sla)/100" },
  { key: "apdex", title: "Apdex", expression: "avg(service_apdex)/10000" },
];
const PER = COLUMNS.length + 1; // the averages and the load's series of each service

export async function services(page, state) {
  const listed = await gql('query { services: listServices(layer: "GENERAL") { id name normal } }');
  const table = el("table", { className: "services" });
  table.createTHead().insertRow().append(el("th", { textContent: "Service" }),
    ...COLUMNS.map((c) => el("th", { className: "number", textContent: c.title })), el("th", { textContent: "Load over the window" }));
  const body = table.createTBody();
  const rows = listed.services.map((s) => {
    const row = body.insertRow();
    row.dataset.service = s.name;
    row.insertCell().append(el("a", { href: `#/service?id=${encodeURIComponent(s.id)}`, textContent: s.name }));
    for (const c of COLUMNS) {
      const cell = row.insertCell();
      Object.assign(cell, { className: "number", textContent: "…" });
      Object.assign(cell.dataset, { column: c.key, value: "" });
    }
    row.insertCell();
    return row;
  });
  const search = el("input", { type: "search", placeholder: "filter by name", value: state.params.get("q") || "" });
  const filter = () => {
    const wanted = search.value.toLowerCase();
    for (const row of body.rows) row.hidden = !row.dataset.service.toLowerCase().includes(wanted);
    state.note({ q: search.value });
  };
  search.addEventListener("input", filter);
  sortable(table, (i) => state.note({ sort: COLUMNS[i - 1].key }));
  filter();
  page.replaceChildren(search, table, when(!listed.services.length, () => el("p", { className: "empty", textContent: "No service has reported yet." })));
  state.showSoFar();
  const asked = listed.services.flatMap((s) => {
    const entity = { serviceName: s.name, normal: s.normal };
    return [...COLUMNS.map((c) => [c.expression, entity]), ["service_cpm", entity]];
  });
  await expressions(asked, state.duration, (first, results) => {
    results.forEach((result, i) => fill(rows[Math.floor((first + i) / PER)], (first + i) % PER, result));
  });
  const sorted = COLUMNS.findIndex((c) => c.key === state.params.get("sort"));
  if (sorted >= 0) table.tHead.rows[0].cells[sorted + 1].click();
}

// One of a service's figures in its row: an average (`column` < PER - 1),
// or the load's series.
function fill(row, column, result) {
  if (column === COLUMNS.length) {
    row.cells[PER].append(sparkline(series(result)));
    return;
  }
  const value = single(result);
  const cell = row.cells[column + 1];
  cell.textContent = figure(value);
  cell.dataset.value = value ?? "";
}

// An endpoint's page: its load, latency and success rate over the window,
// and its dependencies: the endpoints that called it and those it called
// (SkyWalking's endpoint relations, a User endpoint for calls no traced
// service made), each call with its figures.

import { expressions, gql, series, single } from "/ui/api.js";
import { lineChart } from "/ui/chart.js";
import { el, figure } from "/ui/dom.js";

const CHARTS = [["Load (calls / min)", "endpoint_cpm"], ["Latency (ms)", "endpoint_resp_time"], ["Success (%)", "endpoint_sla/100"]];
const CALL_FIGURES = ["avg(endpoint_relation_cpm)", "avg(endpoint_relation_resp_time)", "avg(endpoint_relation_sla)/100"];
const DEPENDENCIES = `query ($id: ID!, $d: Duration!) { t: getEndpointDependencies(endpointId: $id, duration: $d) {
  nodes { id name serviceId serviceName isReal type } calls { id source target } } }`;

// SkyWalking's id of a name: base64 of its UTF-8 bytes.
const encoded = (text) => btoa(String.fromCharCode(...new TextEncoder().encode(text)));

// A link to the page of `name`, an endpoint of the service of `serviceId`.
export const endpointLink = (serviceId, name) =>
  el("a", { href: `#/endpoint?service=${encodeURIComponent(serviceId)}&name=${encodeURIComponent(name)}`, textContent: name });

export async function endpoint(page, state) {
  const [serviceId, name, d] = [state.params.get("service"), state.params.get("name"), state.duration];
  const { service } = await gql("query ($id: String!) { service: getService(serviceId: $id) { name } }", { id: serviceId });
  if (!service) {
    page.textContent = `No service has the id ${serviceId}.`;
    return;
  }
  const id = `${serviceId}_${encoded(name)}`;
  const entity = { serviceName: service.name, normal: true, endpointName: name };
  const { t } = await gql(DEPENDENCIES, { id, d });
  const nodes = new Map(t.nodes.map((n) => [n.id, n]));
  const callEntity = (c) => {
    const [from, to] = [nodes.get(c.source), nodes.get(c.target)];
    return { serviceName: from.serviceName, normal: from.isReal, endpointName: from.name,
      destServiceName: to.serviceName, destNormal: to.isReal, destEndpointName: to.name };
  };
  const asked = [...CHARTS.map(([, e]) => [e, entity]), ...t.calls.flatMap((c) => CALL_FIGURES.map((e) => [e, callEntity(c)]))];
  const results = await expressions(asked, d);
  const grid = el("div", { className: "charts" });
  CHARTS.forEach(([title], i) => grid.append(el("figure", {}, el("figcaption", { textContent: title }), lineChart([{ name: title, points: series(results[i]) }], [d.start, d.end]))));
  const figures = new Map(t.calls.map((c, i) => [c.id, CALL_FIGURES.map((_, j) => single(results[CHARTS.length + i * CALL_FIGURES.length + j]))]));
  const calls = (mine, other) => {
    const table = el("table", { className: "dependencies" });
    table.createTHead().insertRow().append(...["Endpoint", "Service", "Calls / min", "Latency (ms)", "Success (%)"].map((x) => el("th", { textContent: x })));
    const body = table.createTBody();
    for (const c of t.calls.filter(mine)) {
      const n = nodes.get(other(c));
      const row = body.insertRow();
      row.dataset.endpoint = `${n.serviceName} ${n.name}`;
      row.append(el("td", {}, n.isReal ? endpointLink(n.serviceId, n.name) : n.name), el("td", { textContent: n.serviceName }),
        ...figures.get(c.id).map((v) => el("td", { className: "number", textContent: figure(v) })));
    }
    return body.rows.length ? table : el("p", { className: "empty", textContent: "None in the window." });
  };
  page.replaceChildren(
    el("h1", { textContent: `${name} of ${service.name}` }),
    el("p", {}, el("a", { className: "profile-link", href: `#/profiling?service=${encodeURIComponent(serviceId)}&endpoint=${encodeURIComponent(name)}`,
      textContent: "Profile this endpoint's slow requests" })), grid,
    el("h2", { textContent: "Called by" }), calls((c) => c.target === id, (c) => c.source),
    el("h2", { textContent: "Calls" }), calls((c) => c.source === id, (c) => c.target),
  );
}

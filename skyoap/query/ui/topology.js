// Topology: services and the peers they call, one edge per caller → callee,
// coloured by health; zoom with the wheel, pan by dragging; a node opens its
// service's page.

import { expressions, gql, single } from "/ui/api.js";
import { layout } from "/ui/layout.js";

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 1200;
const HEIGHT = 800;
const UNHEALTHY_SLA = 95; // % of calls that succeed, below which a node or edge is red

const svg = (tag, attrs = {}) => {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
};

export async function topology(page, state) {
  const { t } = await gql(`query ($d: Duration!) { t: getGlobalTopology(duration: $d) {
    nodes { id name type isReal } calls { id source target detectPoints } } }`, { d: state.duration });
  const byId = new Map(t.nodes.map((n) => [n.id, n]));
  const real = t.nodes.filter((n) => n.isReal);
  const asked = real.map((n) => ["avg(service_sla)/100", { serviceName: n.name, normal: true }]);
  for (const c of t.calls) {
    const side = c.detectPoints.includes("SERVER") ? "server" : "client";
    const entity = { serviceName: byId.get(c.source).name, normal: byId.get(c.source).isReal,
      destServiceName: byId.get(c.target).name, destNormal: byId.get(c.target).isReal };
    asked.push([`avg(service_relation_${side}_cpm)`, entity], [`avg(service_relation_${side}_call_sla)/100`, entity]);
  }
  const results = await expressions(asked, state.duration);
  const sla = new Map(real.map((n, i) => [n.id, single(results[i])]));
  const started = performance.now();
  const pos = layout(t.nodes, t.calls, WIDTH, HEIGHT);
  page.dataset.layoutMs = String(Math.round(performance.now() - started));

  const root = svg("svg", { class: "topology", viewBox: `0 0 ${WIDTH} ${HEIGHT}` });
  const defs = svg("defs");
  const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "22", refY: "5", markerWidth: "6", markerHeight: "6", orient: "auto" });
  marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#9ca3af" }));
  defs.append(marker);
  root.append(defs);
  const index = new Map(t.nodes.map((n, i) => [n.id, i]));
  t.calls.forEach((c, i) => {
    const [a, b] = [pos[index.get(c.source)], pos[index.get(c.target)]];
    const cpm = single(results[real.length + 2 * i]);
    const ok = single(results[real.length + 2 * i + 1]);
    const line = svg("line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y, class: "edge" + (ok != null && ok < UNHEALTHY_SLA ? " unhealthy" : "") });
    line.dataset.call = `${byId.get(c.source).name} → ${byId.get(c.target).name}`;
    line.dataset.sides = c.detectPoints.join(",");
    const title = svg("title");
    title.textContent = `${line.dataset.call}: ${cpm ?? "–"} calls / min, ${ok ?? "–"} % succeeded (${c.detectPoints.join(" and ").toLowerCase()} side)`;
    line.append(title);
    root.append(line);
  });
  t.nodes.forEach((n, i) => {
    const g = svg("g", { class: "node" + (n.isReal ? "" : " virtual") + ((sla.get(n.id) ?? 100) < UNHEALTHY_SLA ? " unhealthy" : ""), transform: `translate(${pos[i].x},${pos[i].y})` });
    g.dataset.node = n.name;
    g.append(svg("circle", { r: 14 }));
    const label = svg("text", { y: 28, "text-anchor": "middle" });
    label.textContent = n.name;
    g.append(label);
    if (n.isReal) g.addEventListener("click", () => (location.hash = `#/service?id=${encodeURIComponent(n.id)}`));
    root.append(g);
  });
  zoomAndPan(root);
  page.replaceChildren(root);
  if (!t.nodes.length) page.append(Object.assign(document.createElement("p"), { textContent: "No calls in the window." }));
}

function zoomAndPan(root) {
  let view = { x: 0, y: 0, w: WIDTH, h: HEIGHT };
  const apply = () => root.setAttribute("viewBox", `${view.x} ${view.y} ${view.w} ${view.h}`);
  root.addEventListener("wheel", (e) => {
    e.preventDefault();
    const f = e.deltaY > 0 ? 1.15 : 1 / 1.15;
    view = { x: view.x + (view.w * (1 - f)) / 2, y: view.y + (view.h * (1 - f)) / 2, w: view.w * f, h: view.h * f };
    apply();
  });
  let from = null;
  root.addEventListener("pointerdown", (e) => (from = { x: e.clientX, y: e.clientY, view }));
  root.addEventListener("pointerup", () => (from = null));
  root.addEventListener("pointermove", (e) => {
    if (!from) return;
    const scale = from.view.w / root.clientWidth;
    view = { ...from.view, x: from.view.x - (e.clientX - from.x) * scale, y: from.view.y - (e.clientY - from.y) * scale };
    apply();
  });
}

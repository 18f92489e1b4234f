// Topology: services and the peers they call, each with its type, one edge
// per caller → callee, coloured by health; zoom with the wheel, pan by dragging; a node opens its
// service's dashboard, an edge shows both sides' figures.

import { expressions, gql, single } from "/ui/api.js";
import { el, figure, svg } from "/ui/dom.js";
import { layout } from "/ui/layout.js";
import { callFigures, judged } from "/ui/relations.js";

const UNHEALTHY_SLA = 95; // % of calls that succeed, below which a node or edge is red
const TOPOLOGY = `query ($d: Duration!) { t: getGlobalTopology(duration: $d) {
  nodes { id name type isReal } calls { id source target detectPoints sourceComponents targetComponents } } }`;

// The drawing's size: room for every node, at least a laptop screen's.
export function canvasSize(nodes) {
  const side = Math.max(1, Math.sqrt(nodes));
  return { width: Math.max(1000, side * 150), height: Math.max(620, side * 95) };
}

export async function topology(page, state) {
  const { t } = await gql(TOPOLOGY, { d: state.duration });
  const real = t.nodes.filter((n) => n.isReal);
  const [slas, calls] = await Promise.all([
    expressions(real.map((n) => ["avg(service_sla)/100", { serviceName: n.name, normal: true }]), state.duration),
    callFigures(t, state.duration),
  ]);
  const sla = new Map(real.map((n, i) => [n.id, single(slas[i])]));
  const { width, height } = canvasSize(t.nodes.length);
  const started = performance.now();
  const pos = layout(t.nodes, t.calls, width, height);
  page.dataset.layoutMs = String(Math.round(performance.now() - started));

  const root = svg("svg", { class: "topology", viewBox: `0 0 ${width} ${height}` });
  const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "24", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto" });
  marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#9ca3af" }));
  const defs = svg("defs");
  defs.append(marker);
  root.append(defs);
  const panel = el("aside", { className: "panel" }, el("p", { className: "empty", textContent: "Click an edge for both sides' figures, a service for its dashboard." }));
  const byId = new Map(t.nodes.map((n) => [n.id, n]));
  const index = new Map(t.nodes.map((n, i) => [n.id, i]));
  for (const c of t.calls) {
    const [a, b] = [pos[index.get(c.source)], pos[index.get(c.target)]];
    const sides = calls.get(c.id);
    const { cpm, sla: ok } = judged(sides);
    const name = `${byId.get(c.source).name} → ${byId.get(c.target).name}`;
    const line = svg("line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y, class: "edge" + (ok != null && ok < UNHEALTHY_SLA ? " unhealthy" : "") });
    line.dataset.call = name;
    line.dataset.sides = c.detectPoints.join(",");
    const through = [...new Set([...c.sourceComponents, ...c.targetComponents])].join(", ");
    line.append(svg("title", {}, `${name}${through ? ` (${through})` : ""}: ${figure(cpm)} calls / min, ${figure(ok)} % succeeded`));
    line.addEventListener("click", () => panel.replaceChildren(...edgePanel(name, sides)));
    root.append(line);
  }
  t.nodes.forEach((n, i) => {
    const health = (sla.get(n.id) ?? 100) < UNHEALTHY_SLA ? " unhealthy" : "";
    const g = svg("g", { class: `node${n.isReal ? "" : " virtual"}${health}`, transform: `translate(${pos[i].x},${pos[i].y})` });
    g.dataset.node = n.name;
    g.dataset.type = n.type ?? "";
    g.append(svg("circle", { r: 14 }));
    g.append(svg("text", { y: 30, "text-anchor": "middle" }, n.name));
    // What served it (Flask, Tomcat) or what it is (Redis, Mysql), as SkyWalking types it.
    if (n.type) g.append(svg("text", { y: 42, "text-anchor": "middle", class: "type" }, n.type));
    if (n.isReal) g.addEventListener("click", () => dragged || (location.hash = `#/service?id=${encodeURIComponent(n.id)}`));
    root.append(g);
  });
  zoomAndPan(root, width, height);
  page.replaceChildren(el("div", { className: "topology-view" }, root, panel));
  if (!t.nodes.length) page.append(el("p", { className: "empty", textContent: "No calls in the window." }));
}

function edgePanel(name, sides) {
  const rows = ["client", "server"].filter((s) => sides[s]).map((s) => {
    const f = sides[s];
    return el("tr", {}, el("th", { textContent: s === "client" ? "caller's side" : "callee's side" }),
      ...[f.cpm, f.respTime, f.sla].map((v) => el("td", { className: "number", textContent: figure(v) })));
  });
  const table = el("table", {}, el("tr", {}, ...["", "calls / min", "latency (ms)", "success (%)"].map((t) => el("th", { textContent: t }))), ...rows);
  return [el("h3", { textContent: name }), table];
}

let dragged = false; // the pointer moved the view since it went down: not a click

function zoomAndPan(root, width, height) {
  let view = { x: 0, y: 0, w: width, h: height };
  const apply = () => root.setAttribute("viewBox", `${view.x} ${view.y} ${view.w} ${view.h}`);
  root.addEventListener("wheel", (e) => {
    e.preventDefault();
    const f = e.deltaY > 0 ? 1.15 : 1 / 1.15;
    view = { x: view.x + (view.w * (1 - f)) / 2, y: view.y + (view.h * (1 - f)) / 2, w: view.w * f, h: view.h * f };
    apply();
  });
  let from = null;
  root.addEventListener("pointerdown", (e) => {
    from = { x: e.clientX, y: e.clientY, view };
    dragged = false;
  });
  root.addEventListener("pointerup", () => (from = null));
  root.addEventListener("pointerleave", () => (from = null));
  root.addEventListener("pointermove", (e) => {
    if (!from || Math.hypot(e.clientX - from.x, e.clientY - from.y) < 4) return;
    dragged = true;
    // The drawing keeps its proportions: the larger of the two scales is the one in use.
    const scale = Math.max(from.view.w / root.clientWidth, from.view.h / root.clientHeight);
    view = { ...from.view, x: from.view.x - (e.clientX - from.x) * scale, y: from.view.y - (e.clientY - from.y) * scale };
    apply();
  });
}

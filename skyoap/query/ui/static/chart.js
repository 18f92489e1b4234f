// Charts drawn as SVG by our own code.

import { svg } from "/ui/dom.js";

const COLOURS = ["#2563eb", "#16a34a", "#d97706", "#9333ea", "#dc2626"];

// The path of `points` (numbers, or null for a gap) over a box, and a dot
// for each point that has no neighbour to draw a line to.
function trace(points, box, top, colour) {
  const { x0, y0, w, h } = box;
  const x = (i) => x0 + (points.length > 1 ? (i * w) / (points.length - 1) : w / 2);
  const y = (v) => y0 + h - (v / top) * h;
  const parts = [];
  let d = "";
  points.forEach((p, i) => {
    if (p == null) return;
    const joined = points[i - 1] != null;
    d += `${joined ? "L" : "M"}${x(i).toFixed(1)},${y(p).toFixed(1)}`;
    if (!joined && points[i + 1] == null) parts.push(svg("circle", { cx: x(i), cy: y(p), r: 2, fill: colour }));
  });
  if (d) parts.unshift(svg("path", { d, stroke: colour }));
  return parts;
}

const known = (lines) => lines.flatMap((l) => l).filter((p) => p != null);

// A small line of `points` for a table's row.
export function sparkline(points, width = 120, height = 28) {
  const root = svg("svg", { width, height, class: "sparkline" });
  root.dataset.points = points.map((p) => p ?? "").join(",");
  const top = Math.max(0, ...known([points])) || 1;
  root.append(...trace(points, { x0: 2, y0: 3, w: width - 4, h: height - 6 }, top, COLOURS[0]));
  return root;
}

const round = (v) => String(Math.round(v * 100) / 100);

// Lines of several series over the same points, from 0 to the highest value,
// with the window's first and last times under them, a legend, and `marks`
// ({at, label, kind}: a dashed line where the points' index `at` falls, told
// on hovering).
export function lineChart(lines, times = [], marks = [], width = 360, height = 150) {
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart" });
  const top = Math.max(0, ...known(lines.map((l) => l.points))) || 1;
  const box = { x0: 36, y0: 18, w: width - 44, h: height - 38 };
  for (const f of [0, 0.5, 1]) {
    const y = box.y0 + box.h - f * box.h;
    root.append(svg("line", { x1: box.x0, x2: box.x0 + box.w, y1: y, y2: y, class: "grid" }),
      svg("text", { x: box.x0 - 4, y: y + 3, "text-anchor": "end" }, round(top * f)));
  }
  if (times.length === 2) {
    root.append(svg("text", { x: box.x0, y: height - 4 }, times[0]),
      svg("text", { x: box.x0 + box.w, y: height - 4, "text-anchor": "end" }, times[1]));
  }
  const count = Math.max(1, ...lines.map((l) => l.points.length));
  for (const mark of marks.filter((m) => m.at >= 0 && m.at < count)) {
    const x = box.x0 + (count > 1 ? (Math.min(mark.at, count - 1) * box.w) / (count - 1) : box.w / 2);
    const line = svg("line", { x1: x, x2: x, y1: box.y0, y2: box.y0 + box.h, class: `mark ${mark.kind}`, "data-label": mark.label });
    line.append(svg("title", {}, mark.label));
    root.append(line);
  }
  lines.forEach((line, n) => {
    const colour = COLOURS[n % COLOURS.length];
    root.append(...trace(line.points, box, top, colour));
    if (lines.length > 1) root.append(svg("text", { x: box.x0 + n * 44, y: 10, fill: colour }, line.name));
  });
  return root;
}

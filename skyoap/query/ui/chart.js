// Charts drawn as SVG by our own code.

const SVG = "http://www.w3.org/2000/svg";

// A small line of `points` (numbers or null, a gap where null).
export function sparkline(points, width = 120, height = 28) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  svg.setAttribute("class", "sparkline");
  const known = points.filter((p) => p != null);
  if (!known.length) return svg;
  const top = Math.max(...known) || 1;
  const x = (i) => (points.length > 1 ? (i * (width - 2)) / (points.length - 1) + 1 : width / 2);
  const y = (v) => height - 2 - (v / top) * (height - 4);
  let d = "";
  let drawing = false;
  points.forEach((p, i) => {
    if (p == null) {
      drawing = false;
      return;
    }
    d += `${drawing ? "L" : "M"}${x(i).toFixed(1)},${y(p).toFixed(1)}`;
    drawing = true;
  });
  const path = document.createElementNS(SVG, "path");
  path.setAttribute("d", d);
  svg.appendChild(path);
  return svg;
}

const COLOURS = ["#2563eb", "#16a34a", "#d97706", "#9333ea", "#dc2626"];

// Lines of several series over the same points, with the highest value as
// the scale's top and a legend.
export function lineChart(lines, width = 360, height = 140) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("class", "chart");
  const known = lines.flatMap((l) => l.points).filter((p) => p != null);
  const top = Math.max(0, ...known) || 1;
  const axis = document.createElementNS(SVG, "text");
  axis.setAttribute("x", 2);
  axis.setAttribute("y", 10);
  axis.textContent = String(Math.round(top * 100) / 100);
  svg.append(axis);
  lines.forEach((line, n) => {
    const spark = sparkline(line.points, width, height - 14);
    const path = spark.querySelector("path");
    if (path) {
      path.setAttribute("transform", "translate(0,14)");
      path.setAttribute("stroke", COLOURS[n % COLOURS.length]);
      svg.append(path);
    }
    if (lines.length > 1) {
      const legend = document.createElementNS(SVG, "text");
      legend.setAttribute("x", 40 + n * 48);
      legend.setAttribute("y", 10);
      legend.setAttribute("fill", COLOURS[n % COLOURS.length]);
      legend.textContent = line.name;
      svg.append(legend);
    }
  });
  return svg;
}

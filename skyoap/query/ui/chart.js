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

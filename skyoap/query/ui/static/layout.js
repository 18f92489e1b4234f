// A force-directed layout of a graph, by our own code (Fruchterman and
// Reingold's scheme): nodes repel each other, edges pull their ends
// together, a weak pull keeps the graph around its centre, and the moves
// cool down over a fixed number of rounds. The result is then fitted to the
// drawing and nodes still too close are pushed apart.

const GAP = 44; // the least distance between two nodes' centres once fitted

export function layout(nodes, edges, width, height, rounds = 300) {
  const n = nodes.length;
  const k = Math.sqrt((width * height) / Math.max(1, n)) * 0.8;
  // Start on a circle, so the result is the same every time.
  const pos = nodes.map((_, i) => ({
    x: width / 2 + (width / 3) * Math.cos((2 * Math.PI * i) / Math.max(1, n)),
    y: height / 2 + (height / 3) * Math.sin((2 * Math.PI * i) / Math.max(1, n)),
  }));
  const index = new Map(nodes.map((node, i) => [node.id, i]));
  const links = edges.map((e) => [index.get(e.source), index.get(e.target)]).filter(([a, b]) => a != null && b != null && a !== b);
  let temperature = width / 10;
  for (let round = 0; round < rounds; round++) {
    const move = pos.map((p) => ({ x: (width / 2 - p.x) * k * 1e-4, y: (height / 2 - p.y) * k * 1e-4 }));
    for (let i = 0; i < n; i++) {
      for (let j = i + 1; j < n; j++) {
        const dx = pos[i].x - pos[j].x || 0.01 * (i - j);
        const dy = pos[i].y - pos[j].y;
        const d2 = dx * dx + dy * dy || 0.01;
        const f = (k * k) / d2;
        move[i].x += dx * f; move[i].y += dy * f;
        move[j].x -= dx * f; move[j].y -= dy * f;
      }
    }
    for (const [a, b] of links) {
      const dx = pos[a].x - pos[b].x;
      const dy = pos[a].y - pos[b].y;
      const f = Math.sqrt(dx * dx + dy * dy) / k;
      move[a].x -= dx * f; move[a].y -= dy * f;
      move[b].x += dx * f; move[b].y += dy * f;
    }
    for (let i = 0; i < n; i++) {
      const d = Math.sqrt(move[i].x ** 2 + move[i].y ** 2) || 1;
      const step = Math.min(d, temperature);
      pos[i].x += (move[i].x / d) * step;
      pos[i].y += (move[i].y / d) * step;
    }
    temperature *= 0.98;
  }
  fit(pos, width, height);
  separate(pos, width, height);
  return pos;
}

// Scales and moves the positions, proportions kept, into the drawing less
// its margins (room for the names under the nodes).
function fit(pos, width, height) {
  if (!pos.length) return;
  const xs = pos.map((p) => p.x);
  const ys = pos.map((p) => p.y);
  const [x0, y0] = [Math.min(...xs), Math.min(...ys)];
  const [w, h] = [Math.max(...xs) - x0 || 1, Math.max(...ys) - y0 || 1];
  const [mx, my] = [70, 30];
  const scale = Math.min((width - 2 * mx) / w, (height - 2 * my - 20) / h);
  const [ox, oy] = [(width - w * scale) / 2, (height - 20 - h * scale) / 2];
  for (const p of pos) {
    p.x = ox + (p.x - x0) * scale;
    p.y = oy + (p.y - y0) * scale;
  }
}

// Pushes apart, a little at a time, any two nodes closer than GAP.
function separate(pos, width, height) {
  for (let round = 0; round < 100; round++) {
    let moved = false;
    for (let i = 0; i < pos.length; i++) {
      for (let j = i + 1; j < pos.length; j++) {
        const dx = pos[j].x - pos[i].x || 0.01 * (j - i);
        const dy = pos[j].y - pos[i].y;
        const d = Math.sqrt(dx * dx + dy * dy);
        if (d >= GAP) continue;
        const push = (GAP - d) / 2 / (d || 1);
        pos[i].x -= dx * push; pos[i].y -= dy * push;
        pos[j].x += dx * push; pos[j].y += dy * push;
        moved = true;
      }
    }
    for (const p of pos) {
      p.x = Math.min(width - 60, Math.max(60, p.x));
      p.y = Math.min(height - 40, Math.max(20, p.y));
    }
    if (!moved) return;
  }
}

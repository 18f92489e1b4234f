// A force-directed layout of a graph, by our own code: nodes repel each
// other, edges pull their ends together, and the moves cool down over a
// fixed number of rounds (Fruchterman and Reingold's scheme).

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
    const move = pos.map(() => ({ x: 0, y: 0 }));
    for (let i = 0; i < n; i++) {
      for (let j = i + 1; j < n; j++) {
        const dx = pos[i].x - pos[j].x || 0.01;
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
      const d = Math.sqrt(dx * dx + dy * dy) || 0.01;
      const f = d / k;
      move[a].x -= dx * f; move[a].y -= dy * f;
      move[b].x += dx * f; move[b].y += dy * f;
    }
    for (let i = 0; i < n; i++) {
      const d = Math.sqrt(move[i].x ** 2 + move[i].y ** 2) || 1;
      const step = Math.min(d, temperature);
      pos[i].x = Math.min(width - 60, Math.max(60, pos[i].x + (move[i].x / d) * step));
      pos[i].y = Math.min(height - 40, Math.max(20, pos[i].y + (move[i].y / d) * step));
    }
    temperature *= 0.98;
  }
  return pos;
}

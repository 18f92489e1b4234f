// Backends: the databases, caches and message brokers the services called in
// the window, each with its load, latency and success rate, and the slowest
// statements or commands of databases and caches, each linking to its trace.

import { expressions, gql, single } from "/ui/api.js";
import { el, figure } from "/ui/dom.js";

const SLOWEST = 10; // statements or commands of each database or cache

export async function called(page, state) {
  const answer = await fetch("/ui/layers.json");
  if (!answer.ok) throw new Error(`/ui/layers.json answered ${answer.status}`);
  const { called: kinds } = await answer.json(); // each layer's own file says what it shows here
  const sections = await Promise.all(kinds.map((kind) => section(kind, state.duration)));
  page.replaceChildren(...sections.flat());
}

async function section(kind, duration) {
  const { services } = await gql("query ($layer: String!) { services: listServices(layer: $layer) { name normal } }", { layer: kind.layer });
  const asked = services.flatMap((s) => {
    const entity = { serviceName: s.name, normal: false };
    return [...kind.figures.map(([, f]) => [`avg(${kind.prefix}_${f})`, entity]), ...kind.slow.map(([m]) => [`top_n(${m},${SLOWEST},des)`, entity])];
  });
  const results = await expressions(asked, duration);
  const per = kind.figures.length + kind.slow.length;
  const table = el("table", { className: `called ${kind.prefix}` });
  table.createTHead().insertRow().append(...[kind.title.slice(0, -1), ...kind.figures.map(([f]) => f)].map((t) => el("th", { textContent: t })));
  const slow = el("table", { className: `slow ${kind.prefix}` });
  slow.createTHead().insertRow().append(...["Latency (ms)", kind.title.slice(0, -1), "", "Statement", "Trace"].map((t) => el("th", { textContent: t })));
  const samples = [];
  const listed = table.createTBody();
  services.forEach((s, i) => {
    const row = listed.insertRow();
    row.dataset.name = s.name;
    row.append(el("td", { textContent: s.name }),
      ...kind.figures.map((_, j) => el("td", { className: "number", textContent: figure(single(results[i * per + j])) })));
    kind.slow.forEach(([, what], j) => {
      for (const v of results[i * per + kind.figures.length + j].results[0]?.values ?? []) samples.push({ service: s.name, what, ...v });
    });
  });
  samples.sort((a, b) => Number(b.value) - Number(a.value));
  const body = slow.createTBody();
  for (const sample of samples) {
    const row = body.insertRow();
    row.dataset.trace = sample.traceID;
    const trace = el("a", { href: `#/traces?trace=${encodeURIComponent(sample.traceID)}`, textContent: sample.traceID });
    row.append(el("td", { className: "number", textContent: sample.value }), el("td", { textContent: sample.service }),
      el("td", { textContent: kind.slow.length > 1 ? sample.what : "" }), el("td", {}, el("code", { textContent: sample.id })), el("td", {}, trace));
  }
  return [
    el("h2", { textContent: kind.title }),
    services.length ? table : el("p", { className: "empty", textContent: `No ${kind.title.toLowerCase()} were called in the window.` }),
    ...(samples.length ? [el("h3", { textContent: `Slowest ${kind.slow.length > 1 ? "commands" : "statements"}` }), slow] : []),
  ];
}

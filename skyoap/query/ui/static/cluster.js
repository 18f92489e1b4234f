// The cluster: every node with its role, addresses and the figures of its
// own self-metrics; every consumer group with its members and, per
// partition, its owner, commit and lag.

import { QueryError } from "/ui/api.js";
import { el, figure, time, when } from "/ui/dom.js";

const MB = 2 ** 20;

async function overview() {
  const answer = await fetch("/status/cluster/overview", { headers: { Accept: "application/json" } });
  if (!answer.ok) throw new QueryError(`the cluster overview answered ${answer.status}`);
  return answer.json();
}

function table(className, titles, rows) {
  const t = el("table", { className });
  t.createTHead().insertRow().append(...titles.map((x) => el("th", { textContent: x })));
  const body = t.createTBody();
  for (const cells of rows) {
    const row = body.insertRow();
    row.append(...cells.map((c) => (c instanceof Node ? el("td", {}, c) : el("td", { className: typeof c === "number" ? "number" : "", textContent: c ?? "–" }))));
  }
  return t;
}

function nodeRow(n) {
  const f = n.figures;
  const name = el("span", { textContent: n.name + (n.self ? " (this node)" : "") });
  const addresses = [`agents ${n.address}`, n.internal && `internal ${n.internal}`, n.admin && `admin ${n.admin}`].filter(Boolean).join(", ");
  if (!f) return [name, n.role, addresses, time(n.startedMs), el("span", { className: "unread", textContent: n.unread }), "", "", "", ""];
  return [name, n.role, addresses, time(n.startedMs), `${f.queued} / ${f.capacity}`, f.dropped + f.shed,
    `${figure(f.memoryHeld / MB, 1)} of ${figure(f.memoryLimit / MB, 0)} MB`,
    f.persistMeanMs == null ? "–" : `${figure(f.persistMeanMs, 1)} ms` + (f.persistP99Ms == null ? "" : ` (p99 ≤ ${figure(f.persistP99Ms, 0)} ms)`), `${f.received} / ${f.stored}`];
}

export async function cluster(page) {
  const { nodes, groups } = await overview();
  const nodesTable = table("nodes", ["Node", "Role", "Addresses", "Started (UTC)", "Queued / capacity", "Dropped", "Memory held",
    "Persist round", "Received / stored"], nodes.map(nodeRow));
  nodesTable.querySelectorAll("tbody tr").forEach((tr, i) => (tr.dataset.node = nodes[i].name));
  const groupSections = groups.map((g) => {
    const section = el("section", { className: "group" },
      el("h3", { textContent: `${g.name}: ${g.lag} records behind` }),
      el("p", { className: "meta", textContent: `members: ${g.members.map((m) => `${m.name}${m.host ? ` on ${m.host}` : ""} (${m.topics.join(", ")})`).join("; ") || "none"}` }),
      table("partitions", ["Topic", "Partition", "Owner", "State", "Committed", "End", "Lag"],
        g.partitions.map((p) => [p.topic, p.partition, p.owner, p.state, p.committed, p.end, p.lag])));
    section.dataset.group = g.name;
    return section;
  });
  page.replaceChildren(el("h2", { textContent: "Nodes" }), nodesTable,
    el("h2", { textContent: "Consumer groups" }), when(!groups.length, () => el("p", { className: "empty", textContent: "No consumer group has joined." })), ...groupSections);
}

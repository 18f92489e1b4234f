// Logs: search by service, instance, endpoint, trace id, tags and words of
// their content; the newest first.

import { gql } from "/ui/api.js";
import { el, time, when } from "/ui/dom.js";
import { entityCondition, entityPickers, input, searchForm, searchedTags } from "/ui/search.js";

export const PAGE_SIZE = 100;
export const LOGS = `query ($condition: LogQueryCondition) {
  queryLogs(condition: $condition) {
    logs { serviceName serviceInstanceName endpointName traceId timestamp contentType content tags { key value } }
  }
}`;

const words = (text) => (text || "").split(",").map((w) => w.trim()).filter(Boolean);

function condition(state) {
  const p = state.params;
  const c = { paging: { pageNum: 1, pageSize: PAGE_SIZE }, queryOrder: "DES" };
  if (p.get("traceId")) c.relatedTrace = { traceId: p.get("traceId") };
  else c.queryDuration = state.duration;
  Object.assign(c, entityCondition(p));
  if (words(p.get("words")).length) c.keywordsOfContent = words(p.get("words"));
  if (words(p.get("without")).length) c.excludingKeywordsOfContent = words(p.get("without"));
  const tags = searchedTags(p, "level=ERROR");
  if (tags.length) c.tags = tags;
  return c;
}

export async function logs(page, state) {
  const [pickers, { queryLogs }] = await Promise.all([entityPickers(state), gql(LOGS, { condition: condition(state) })]);
  const form = searchForm(state, [...pickers, input(state, "traceId", "trace id"),
    input(state, "tags", "tags: level=ERROR, …"), input(state, "words", "content has: word, …"),
    input(state, "without", "content lacks: word, …")]);
  const table = el("table", { className: "logs" });
  table.createTHead().insertRow().append(...["Time", "Service", "Instance", "Endpoint", "Trace", "Tags", "Content"].map((t) => el("th", { textContent: t })));
  const body = table.createTBody();
  for (const l of queryLogs.logs) {
    const row = body.insertRow();
    const trace = l.traceId ? el("a", { href: `#/traces?trace=${encodeURIComponent(l.traceId)}&traceId=${encodeURIComponent(l.traceId)}`, textContent: l.traceId }) : "–";
    row.append(el("td", { className: "time", textContent: time(l.timestamp) }),
      el("td", { textContent: l.serviceName }), el("td", { textContent: l.serviceInstanceName || "–" }),
      el("td", { textContent: l.endpointName || "–" }), el("td", {}, trace),
      el("td", { className: "tags", textContent: l.tags.map((t) => `${t.key}=${t.value}`).join(" ") }),
      el("td", {}, el("pre", { textContent: l.content })));
  }
  page.replaceChildren(form, table, when(!queryLogs.logs.length, () => el("p", { className: "empty", textContent: "No log matches." })),
    when(queryLogs.logs.length === PAGE_SIZE, () => el("p", { className: "meta", textContent: `The newest ${PAGE_SIZE} shown: narrow the search for others.` })));
}

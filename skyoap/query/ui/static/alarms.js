// Alarms: those the rules raised in the window, the newest first, with the
// events of their services and instances; search by words of their message,
// scope and tags.

import { gql } from "/ui/api.js";
import { el, select, time, when } from "/ui/dom.js";
import { eventBadge } from "/ui/events.js";
import { input, searchForm, searchedTags } from "/ui/search.js";

export const PAGE_SIZE = 100;
const ALARMS = `query ($duration: Duration!, $scope: Scope, $keyword: String, $tags: [AlarmTag], $paging: Pagination!) {
  getAlarm(duration: $duration, scope: $scope, keyword: $keyword, tags: $tags, paging: $paging) {
    msgs { id startTime recoveryTime scope name message tags { key value } snapshot { expression }
      events { uuid name type message startTime endTime } }
  }
}`;
const SCOPES = [["Service", "service"], ["ServiceInstance", "instance"], ["Endpoint", "endpoint"],
  ["ServiceRelation", "service call"], ["ServiceInstanceRelation", "instance call"], ["EndpointRelation", "endpoint call"]];
const SCOPE_NAMES = Object.fromEntries(SCOPES);

function variables(state) {
  const p = state.params;
  const v = { duration: state.duration, paging: { pageNum: 1, pageSize: PAGE_SIZE } };
  if (p.get("scope")) v.scope = p.get("scope");
  if (p.get("keyword")) v.keyword = p.get("keyword");
  const tags = searchedTags(p, "level=WARNING");
  if (tags.length) v.tags = tags;
  return v;
}

export async function alarms(page, state) {
  const p = state.params;
  const { getAlarm } = await gql(ALARMS, variables(state));
  const form = searchForm(state, [input(state, "keyword", "message has"),
    select("scope", [["", "every scope"], ...SCOPES], p.get("scope")), input(state, "tags", "tags: level=WARNING, …")]);
  const table = el("table", { className: "alarms" });
  table.createTHead().insertRow().append(...["Started", "Recovered", "Scope", "Entity", "Rule", "Message", "Tags", "Events"].map((t) => el("th", { textContent: t })));
  const body = table.createTBody();
  for (const a of getAlarm.msgs) {
    const row = body.insertRow();
    row.dataset.name = a.name;
    const entity = a.scope === "Service" ? el("a", { href: `#/service?id=${encodeURIComponent(a.id)}`, textContent: a.name }) : a.name;
    const recovered = a.recoveryTime == null ? el("span", { className: "firing", textContent: "firing" }) : time(a.recoveryTime);
    row.append(el("td", { className: "time", textContent: time(a.startTime) }), el("td", { className: "time" }, recovered),
      el("td", { textContent: SCOPE_NAMES[a.scope] || "–" }), el("td", {}, entity), el("td", {}, el("code", { textContent: a.snapshot.expression })),
      el("td", { textContent: a.message }), el("td", {}, ...a.tags.map((t) => el("span", { className: "tag", textContent: `${t.key}=${t.value}` }))),
      el("td", { className: "events" }, ...a.events.map(eventBadge)));
  }
  page.replaceChildren(form, table, when(!getAlarm.msgs.length, () => el("p", { className: "empty", textContent: "No alarm matches." })),
    when(getAlarm.msgs.length === PAGE_SIZE, () => el("p", { className: "meta", textContent: `The newest ${PAGE_SIZE} shown: narrow the search for others.` })));
}

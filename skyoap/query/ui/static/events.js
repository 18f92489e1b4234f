// Events agents and tools reported (a start, an upgrade, a crash): a
// service's, in a table under its charts and marked on them, and each
// alarm's, beside it.

import { gql } from "/ui/api.js";
import { el, time } from "/ui/dom.js";

export const PAGE_SIZE = 100;
const EVENTS = `query ($condition: EventQueryCondition) {
  queryEvents(condition: $condition) {
    events { uuid source { service serviceInstance endpoint } name type message startTime endTime }
  }
}`;

// The events of the service named `service` in `duration`, the latest first.
export async function serviceEvents(service, duration) {
  const condition = { source: { service }, time: duration, paging: { pageNum: 1, pageSize: PAGE_SIZE } };
  return (await gql(EVENTS, { condition })).queryEvents.events;
}

// One event's name, coloured by its type, its message and times on hovering.
export function eventBadge(e) {
  const ended = e.endTime == null ? "lasting" : `to ${time(e.endTime)}`;
  return el("span", { className: `event ${e.type.toLowerCase()}`, textContent: e.name, title: `${e.message} (${time(e.startTime || e.endTime)} ${ended})` });
}

export function eventsTable(events) {
  const table = el("table", { className: "events" });
  table.createTHead().insertRow().append(...["Started", "Ended", "Event", "Where", "Message"].map((t) => el("th", { textContent: t })));
  const body = table.createTBody();
  for (const e of events) {
    const row = body.insertRow();
    row.dataset.uuid = e.uuid;
    const where = [e.source.serviceInstance, e.source.endpoint].filter(Boolean).join(" ") || "the service";
    row.append(el("td", { className: "time", textContent: e.startTime ? time(e.startTime) : "–" }),
      el("td", { className: "time", textContent: e.endTime == null ? "lasting" : time(e.endTime) }),
      el("td", {}, eventBadge(e)), el("td", { textContent: where }), el("td", { textContent: e.message }));
  }
  return table;
}

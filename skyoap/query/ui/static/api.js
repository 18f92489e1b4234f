// The node's GraphQL endpoint, asked what SkyWalking's UI asks.

export class QueryError extends Error {}

export async function gql(query, variables = {}) {
  const answer = await fetch("/graphql", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ query, variables }),
  });
  const body = await answer.json().catch(() => ({}));
  if (body.errors && body.errors.length) {
    throw new QueryError(body.errors.map((e) => e.message).join(" "));
  }
  if (!answer.ok) throw new QueryError(`the node answered ${answer.status}`);
  return body.data;
}

const pad = (n) => String(n).padStart(2, "0");

// A Duration from `start` to `end` (Dates), in the server's zone (UTC): by
// minute up to an hour, by hour up to three days, by day beyond.
export function between(start, end) {
  const minutes = (end - start) / 60_000;
  const step = minutes <= 60 ? "MINUTE" : minutes <= 3 * 1440 ? "HOUR" : "DAY";
  const text = (t) =>
    `${t.getUTCFullYear()}-${pad(t.getUTCMonth() + 1)}-${pad(t.getUTCDate())}` +
    (step === "DAY" ? "" : ` ${pad(t.getUTCHours())}`) + (step === "MINUTE" ? pad(t.getUTCMinutes()) : "");
  return { start: text(start), end: text(end), step };
}

const STEP_MS = { MINUTE: 60_000, HOUR: 3_600_000, DAY: 86_400_000 };

// Where the time `ms` falls among the points of a series over `duration`:
// 0 at the start of its first step, 1 at its second's, and so on.
export function pointAt(duration, ms) {
  const [date, hm = ""] = duration.start.split(" ");
  const start = Date.parse(`${date}T${hm.slice(0, 2) || "00"}:${hm.slice(2, 4) || "00"}:00Z`);
  return (ms - start) / STEP_MS[duration.step];
}

// A Duration of the last `minutes`, this minute included.
export const lastMinutes = (minutes, now = new Date()) => between(new Date(now.getTime() - (minutes - 1) * 60_000), now);

const BATCH = 100; // expressions in one request: a page of many entities sends several at once

// Many execExpression, aliased e0, e1, … in requests of BATCH, as SkyWalking's
// UI batches a list; the results in the order asked. `arrived(first,
// results)`, if given, is told of each batch's as it comes (`first`: the
// place of its first among those asked).
export async function expressions(asked, duration, arrived = () => {}) {
  const batches = [];
  for (let i = 0; i < asked.length; i += BATCH) {
    batches.push(batch(asked.slice(i, i + BATCH), duration).then((results) => {
      arrived(i, results);
      return results;
    }));
  }
  return (await Promise.all(batches)).flat();
}

async function batch(asked, duration) {
  const declared = asked.map((_, i) => `$x${i}: String! $n${i}: Entity!`).join(" ");
  const fields = asked
    .map((_, i) => `e${i}: execExpression(expression: $x${i}, entity: $n${i}, duration: $d) {
      type error results { metric { labels { key value } } values { id value traceID } } }`)
    .join("\n");
  const variables = { d: duration };
  asked.forEach(([expression, entity], i) => {
    variables[`x${i}`] = expression;
    variables[`n${i}`] = entity;
  });
  const data = await gql(`query (${declared} $d: Duration!) { ${fields} }`, variables);
  return asked.map((_, i) => data[`e${i}`]);
}

// The one value of a SINGLE_VALUE result, as a number (null: no data).
export function single(result) {
  const value = result?.results?.[0]?.values?.[0]?.value;
  return value == null ? null : Number(value);
}

// The points of a TIME_SERIES_VALUES result, numbers or null.
export function series(result) {
  return (result?.results?.[0]?.values ?? []).map((v) => (v.value == null ? null : Number(v.value)));
}

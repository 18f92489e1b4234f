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

// A Duration of the last `minutes`, in the server's zone (UTC), by minute
// up to an hour and by hour beyond.
export function lastMinutes(minutes, now = new Date()) {
  const step = minutes > 60 ? "HOUR" : "MINUTE";
  const text = (t) =>
    `${t.getUTCFullYear()}-${pad(t.getUTCMonth() + 1)}-${pad(t.getUTCDate())} ${pad(t.getUTCHours())}` +
    (step === "MINUTE" ? pad(t.getUTCMinutes()) : "");
  const start = new Date(now.getTime() - (minutes - 1) * 60_000);
  return { start: text(start), end: text(now), step };
}

// One request of many execExpression, aliased e0, e1, …, as SkyWalking's UI
// batches a list; the results in the order asked.
export async function expressions(asked, duration) {
  if (!asked.length) return [];
  const declared = asked.map((_, i) => `$x${i}: String! $n${i}: Entity!`).join(" ");
  const fields = asked
    .map((_, i) => `e${i}: execExpression(expression: $x${i}, entity: $n${i}, duration: $d) {
      type error results { metric { labels { key value } } values { id value } } }`)
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

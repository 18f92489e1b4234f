// Small helpers to build the pages' elements.

// An SVG element with attributes.
export function svg(tag, attrs = {}, text = "") {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text) node.textContent = text;
  return node;
}

// An element with properties and children.
export function el(tag, props = {}, ...children) {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
}

// What `make()` builds when `shown`, nothing otherwise.
export const when = (shown, make) => (shown ? make() : "");

// A number for a table: rounded to what can be read, "–" for none.
export function figure(value, digits = 2) {
  if (value == null) return "–";
  return Number.isInteger(value) ? String(value) : String(Math.round(value * 10 ** digits) / 10 ** digits);
}

// A time as the UI shows it, in UTC (the zone of the node's time buckets).
export const time = (ms) => new Date(Number(ms)).toISOString().replace("T", " ").slice(0, 19);

// A <select> of `options` ([value, text] pairs) with `chosen` selected.
export function select(name, options, chosen) {
  return el("select", { name }, ...options.map(([value, text]) => el("option", { value, textContent: text, selected: value === (chosen || "") })));
}

// Makes a table's columns after the first sort its rows when their heading
// is clicked, highest first, by each cell's data-value; `sorted(i)` is told
// of the column.
export function sortable(table, sorted = () => {}) {
  const body = table.tBodies[0];
  [...table.tHead.rows[0].cells].forEach((th, i) => {
    if (i === 0 || body?.rows[0]?.cells[i]?.dataset.value === undefined) return;
    th.classList.add("sortable");
    th.addEventListener("click", () => {
      const value = (row) => Number(row.cells[i].dataset.value || -1);
      body.append(...[...body.rows].sort((a, b) => value(b) - value(a)));
      for (const other of table.tHead.rows[0].cells) other.classList.toggle("sorted", other === th);
      sorted(i);
    });
  });
  return table;
}

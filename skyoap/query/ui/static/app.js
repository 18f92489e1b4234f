// The UI's frame: pages by the URL's hash (#/page?key=value…, so that a link
// shows what its sender saw), the time window and auto-refresh.

import { alarms } from "/ui/alarms.js";
import { between, lastMinutes, QueryError } from "/ui/api.js";
import { called } from "/ui/called.js";
import { cluster } from "/ui/cluster.js";
import { endpoint } from "/ui/endpoint.js";
import { logs } from "/ui/logs.js";
import { profiling } from "/ui/profiling.js";
import { service } from "/ui/service.js";
import { services } from "/ui/services.js";
import { topology } from "/ui/topology.js";
import { traces } from "/ui/traces.js";

const PAGES = { services, service, endpoint, topology, called, traces, logs, profiling, alarms, cluster };
const REFRESH_MS = 30_000;
const WINDOW = ["last", "from", "to", "refresh"];
const LASTS = ["15", "60", "1440", "range"];
const form = document.getElementById("window");
let kept = new URLSearchParams({ last: "15" }); // the window, carried from page to page
let timer = null;
let drawing = 0; // the latest draw: an earlier one that ends later is dropped

function route() {
  const [path, query] = (location.hash.replace(/^#\/?/, "") || "services").split("?");
  return { name: path, params: new URLSearchParams(query) };
}

function go(name, params) {
  const hash = `#/${name}?${params}`;
  if (location.hash === hash) show(); // the same search again: drawn again
  else location.hash = hash;
}

// The Duration the window's parameters describe: the last minutes, or a
// range of UTC times.
function durationOf(params) {
  if (params.get("last") === "range" && params.get("from") && params.get("to")) {
    const [a, b] = [new Date(`${params.get("from")}Z`), new Date(`${params.get("to")}Z`)];
    return a <= b ? between(a, b) : between(b, a);
  }
  return lastMinutes(Number(params.get("last")) || 15);
}

function showWindow(params) {
  if (!LASTS.includes(params.get("last"))) params.set("last", "15");
  form.last.value = params.get("last");
  form.from.value = params.get("from") || "";
  form.to.value = params.get("to") || "";
  form.classList.toggle("range", form.last.value === "range");
  form.refresh.checked = params.get("refresh") === "1";
  clearInterval(timer);
  timer = form.refresh.checked ? setInterval(show, REFRESH_MS) : null;
}

async function show() {
  const { name, params } = route();
  if (!params.has("last")) {
    // A link within the UI names no window: the one in use goes on.
    for (const k of WINDOW) if (kept.has(k)) params.set(k, kept.get(k));
    history.replaceState(null, "", `#/${name}?${params}`);
  }
  kept = new URLSearchParams(WINDOW.filter((k) => params.has(k)).map((k) => [k, params.get(k)]));
  showWindow(params);
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("current", a.dataset.page === name);
  const page = document.getElementById("page");
  const render = PAGES[name];
  if (!render) {
    page.textContent = `There is no page ${name}.`;
    return;
  }
  const update = (changes) => {
    for (const [k, v] of Object.entries(changes)) v == null || v === "" ? params.delete(k) : params.set(k, v);
  };
  // The page is drawn aside and shown whole, unless another draw began
  // meanwhile, or the page shows what it has drawn so far first.
  const mine = ++drawing;
  const drawn = document.createElement("main");
  let early = false;
  const state = {
    params,
    duration: durationOf(params),
    // Changes the URL and draws the page anew.
    set(changes) {
      update(changes);
      go(name, params);
    },
    // Changes the URL only: the page has already shown the change.
    note(changes) {
      update(changes);
      history.replaceState(null, "", `#/${name}?${params}`);
    },
    // Shows what the page has drawn so far while it goes on drawing (a long
    // list before its figures), still busy; what it draws after is shown too.
    showSoFar() {
      if (mine !== drawing) return;
      early = true;
      page.replaceChildren(...drawn.childNodes);
      for (const k of Object.keys(page.dataset)) delete page.dataset[k];
      drawn.dataset.firstShownMs = String(Math.round(performance.now()));
      page.dataset.firstShownMs = drawn.dataset.firstShownMs;
    },
  };
  page.setAttribute("aria-busy", "true");
  let failed = false;
  try {
    await render(drawn, state);
  } catch (e) {
    const message = document.createElement("p");
    message.className = "error";
    message.textContent = e instanceof QueryError ? e.message : `The page failed: ${e}`;
    drawn.replaceChildren(message);
    failed = true;
  }
  if (mine !== drawing) return;
  if (early && !failed) page.append(...drawn.childNodes);
  else page.replaceChildren(...drawn.childNodes);
  for (const k of Object.keys(page.dataset)) delete page.dataset[k];
  Object.assign(page.dataset, drawn.dataset, { shown: name, drawnMs: String(Math.round(performance.now())) });
  page.removeAttribute("aria-busy");
}

function start() {
  form.addEventListener("change", () => {
    const { name, params } = route();
    for (const k of WINDOW) params.delete(k);
    params.set("last", form.last.value);
    if (form.last.value === "range") {
      const now = new Date(Date.now() - (Date.now() % 60_000)).toISOString().slice(0, 16);
      params.set("from", form.from.value || new Date(Date.now() - 3_600_000).toISOString().slice(0, 16));
      params.set("to", form.to.value || now);
    }
    if (form.refresh.checked) params.set("refresh", "1");
    go(name, params);
  });
  form.addEventListener("submit", (e) => e.preventDefault());
  window.addEventListener("hashchange", show);
  show();
}

start();

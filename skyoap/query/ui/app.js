// The UI's frame: pages by the URL's hash (#/page?key=value…, so that a link
// shows what its sender saw), the time window and auto-refresh.

import { between, lastMinutes, QueryError } from "/ui/api.js";
import { cluster } from "/ui/cluster.js";
import { logs } from "/ui/logs.js";
import { service } from "/ui/service.js";
import { services } from "/ui/services.js";
import { topology } from "/ui/topology.js";
import { traces } from "/ui/traces.js";

const PAGES = { services, service, topology, traces, logs, cluster };
const REFRESH_MS = 30_000;
const WINDOW = ["last", "from", "to", "refresh"];
const form = document.getElementById("window");
let kept = new URLSearchParams({ last: "15" }); // the window, carried from page to page
let timer = null;

function route() {
  const [path, query] = (location.hash.replace(/^#\/?/, "") || "services").split("?");
  return { name: path, params: new URLSearchParams(query) };
}

function go(name, params) {
  location.hash = `#/${name}?${params}`;
}

// The Duration the window's parameters describe: the last minutes, or a
// range of UTC times.
function durationOf(params) {
  if (params.get("last") === "range" && params.get("from") && params.get("to")) {
    return between(new Date(`${params.get("from")}Z`), new Date(`${params.get("to")}Z`));
  }
  return lastMinutes(Number(params.get("last")) || 15);
}

function showWindow(params) {
  form.last.value = params.get("last") || "15";
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
  const state = {
    params,
    duration: durationOf(params),
    set(changes) {
      for (const [k, v] of Object.entries(changes)) v == null || v === "" ? params.delete(k) : params.set(k, v);
      go(name, params);
    },
  };
  page.setAttribute("aria-busy", "true");
  try {
    await render(page, state);
  } catch (e) {
    const message = document.createElement("p");
    message.className = "error";
    message.textContent = e instanceof QueryError ? e.message : `The page failed: ${e}`;
    page.replaceChildren(message);
  } finally {
    page.removeAttribute("aria-busy");
    page.dataset.shown = name;
    page.dataset.drawnMs = String(Math.round(performance.now())); // since the UI was opened
  }
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

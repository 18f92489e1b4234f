// The UI's frame: pages by the URL's hash (#/page?key=value…, so a link
// shows what its sender saw), the time window and auto-refresh.

import { lastMinutes, QueryError } from "/ui/api.js";
import { service } from "/ui/service.js";
import { services } from "/ui/services.js";
import { topology } from "/ui/topology.js";
import { traces } from "/ui/traces.js";

const PAGES = { services, service, topology, traces };
const REFRESH_MS = 30_000;

function route() {
  const [path, query] = (location.hash.replace(/^#\/?/, "") || "services").split("?");
  return { name: path, params: new URLSearchParams(query) };
}

function go(name, params) {
  location.hash = `#/${name}?${params}`;
}

async function show() {
  const { name, params } = route();
  const form = document.getElementById("window");
  const minutes = Number(params.get("last") || 15);
  form.last.value = String(minutes);
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("current", a.dataset.page === name);
  const page = document.getElementById("page");
  const render = PAGES[name];
  if (!render) {
    page.textContent = `There is no page ${name}.`;
    return;
  }
  const state = {
    params,
    duration: lastMinutes(minutes),
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
  }
}

function start() {
  const form = document.getElementById("window");
  form.last.addEventListener("change", () => {
    const { name, params } = route();
    params.set("last", form.last.value);
    go(name, params);
  });
  let timer = null;
  form.refresh.addEventListener("change", () => {
    clearInterval(timer);
    timer = form.refresh.checked ? setInterval(show, REFRESH_MS) : null;
  });
  window.addEventListener("hashchange", show);
  show();
}

start();

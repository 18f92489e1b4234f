// What the traces, logs and alarms pages search by: a service, its instances
// and endpoints, tags, and fields whose values go into the URL when submitted.

import { gql, QueryError } from "/ui/api.js";
import { el, select } from "/ui/dom.js";

// The service, and its instances and endpoints once a service is chosen.
export async function entityPickers(state) {
  const p = state.params;
  const id = p.get("service");
  const [{ services }, pods] = await Promise.all([
    gql('query { services: listServices(layer: "GENERAL") { id name } }'),
    id ? gql(`query ($id: ID!, $d: Duration!) { instances: listInstances(duration: $d, serviceId: $id) { id name }
      endpoints: findEndpoint(serviceId: $id, keyword: "", limit: 100) { id name } }`, { id, d: state.duration })
      : { instances: [], endpoints: [] },
  ]);
  const pairs = (list, every) => [["", every], ...list.map((x) => [x.id, x.name])];
  const service = select("service", pairs(services, "every service"), id);
  service.addEventListener("change", () => state.set({ service: service.value, instance: null, endpoint: null }));
  return [service, ...(id ? [select("instance", pairs(pods.instances, "every instance"), p.get("instance")),
    select("endpoint", pairs(pods.endpoints, "every endpoint"), p.get("endpoint"))] : [])];
}

// A search form of `fields`: submitted, its values go into the URL.
export function searchForm(state, fields) {
  const form = el("form", { className: "search" }, ...fields, el("button", { textContent: "Search" }));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    state.set(Object.fromEntries(new FormData(form).entries()));
  });
  return form;
}

export const input = (state, name, placeholder) => el("input", { name, placeholder, value: state.params.get(name) || "" });

// The ids of the entity the pickers chose, as a condition names them.
export function entityCondition(params) {
  const c = {};
  if (params.get("service")) c.serviceId = params.get("service");
  if (params.get("instance")) c.serviceInstanceId = params.get("instance");
  if (params.get("endpoint")) c.endpointId = params.get("endpoint");
  return c;
}

// The tags of the field `tags` ("key=value, …"), as a search names them;
// `example` shows the form in the error for one without "=".
export function searchedTags(params, example) {
  const tags = (params.get("tags") || "").split(",").map((t) => t.trim()).filter(Boolean);
  for (const t of tags) {
    if (!t.includes("=")) throw new QueryError(`A tag is searched as key=value (${example}), not as ${t}.`);
  }
  return tags.map((t) => ({ key: t.slice(0, t.indexOf("=")), value: t.slice(t.indexOf("=") + 1) }));
}

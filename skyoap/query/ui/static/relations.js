// The figures of a topology's calls, each side that saw them: the caller's
// (client) and the callee's (server).

import { expressions, single } from "/ui/api.js";

const FIGURES = [["cpm", "cpm"], ["sla", "call_sla/100"], ["respTime", "resp_time"]];

// Map of call id → { client: {cpm, sla, respTime}, server: {…} }, a side
// present when the call names it in its detectPoints.
export async function callFigures(topology, duration) {
  const byId = new Map(topology.nodes.map((n) => [n.id, n]));
  const asked = [];
  const where = [];
  for (const c of topology.calls) {
    const [from, to] = [byId.get(c.source), byId.get(c.target)];
    const entity = { serviceName: from.name, normal: from.isReal, destServiceName: to.name, destNormal: to.isReal };
    for (const point of c.detectPoints) {
      const side = point.toLowerCase();
      for (const [key, figure] of FIGURES) {
        asked.push([`avg(service_relation_${side}_${figure})`, entity]);
        where.push([c.id, side, key]);
      }
    }
  }
  const results = await expressions(asked, duration);
  const out = new Map(topology.calls.map((c) => [c.id, {}]));
  where.forEach(([id, side, key], i) => {
    const sides = out.get(id);
    (sides[side] ??= {})[key] = single(results[i]);
  });
  return out;
}

// The side a call is judged by: the callee's when it reports, else the caller's.
export const judged = (sides) => sides.server ?? sides.client ?? {};

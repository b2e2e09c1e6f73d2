// Schema reviews (one per device lineage and schema) and registry reviews (one per
// project or fleet scope and schema, when the policy coalesces), filtered by status.

import { get } from "../api.js";
import { refreshOnEvents } from "../events.js";
import { clear, h, link, num, pill, table, when, words } from "../ui.js";
import { ReviewStatus } from "../vocabulary.js";

const STATUSES = Object.values(ReviewStatus);

export async function render(main, { query }) {
  const status = query.get("status") ?? "open";
  const open = status === "open";
  const filter = open || !status ? "" : `&status=${status}`;
  const [schema, registry, lineages] = await Promise.all([
    get(`/edge/schema-reviews?limit=200${filter}`),
    get(`/edge/registry-reviews?limit=200${filter}`),
    get("/edge/lineages?limit=500")]);
  const keep = (r) => !open || r.status === ReviewStatus.QUEUED || r.status === ReviewStatus.IN_REVIEW;
  const device = Object.fromEntries(lineages.data.map((l) => [l.id, l.device_name]));
  const select = h("select", { id: "review-status", onchange: (ev) => {
    location.hash = `#/reviews?status=${ev.target.value}`;
  } }, [["open", "open (queued or in review)"], ["", "all"], ...STATUSES.map((s) => [s, words(s)])]
    .map(([v, t]) => h("option", { value: v, selected: v === status }, t)));
  clear(main,
    h("h1", {}, "Reviews"),
    h("div", { class: "filters" }, h("label", {}, "Status", select)),
    h("h2", {}, `Schema reviews (${num(schema.data.filter(keep).length)})`),
    table("Schema reviews", [
      { label: "table", value: (r) => link(`#/reviews/schema/${r.id}`, r.source_table) },
      { label: "device", value: (r) => device[r.lineage_id] || r.device_id.slice(0, 8) },
      { label: "status", value: (r) => pill(r.status) },
      { label: "classification", value: (r) => words(r.classification) },
      { label: "claimed by", value: (r) => r.claimed_by || "-" },
      { label: "schema", value: (r) => h("code", {}, r.schema_hash.slice(0, 8)) },
      { label: "created", value: (r) => when(r.created_at) },
    ], schema.data.filter(keep), { empty: "none" }),
    h("h2", {}, `Registry reviews (${num(registry.data.filter(keep).length)})`),
    table("Registry reviews", [
      { label: "table", value: (r) => link(`#/reviews/registry/${r.id}`, r.source_table) },
      { label: "scope", value: (r) => r.scope },
      { label: "pipeline", value: (r) => r.pipeline },
      { label: "status", value: (r) => pill(r.status) },
      { label: "claimed by", value: (r) => r.claimed_by || "-" },
      { label: "created", value: (r) => when(r.created_at) },
    ], registry.data.filter(keep), { empty: "none (registry reviews exist when the policy's schema_coalescing_mode is project or fleet)" }));
  return refreshOnEvents();
}

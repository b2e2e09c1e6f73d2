// Lineages: one per (device, table). Filters by status and device, and the server-side
// search q= (device name, source table, target table, pause reason); pages of 50.

import { all, get } from "../api.js";
import { refreshOnEvents } from "../events.js";
import { ago, clear, h, link, num, pill, table, words } from "../ui.js";
import { LineageStatus } from "../vocabulary.js";

const LIMIT = 50;

export async function render(main, { query }) {
  const status = query.get("status") || "";
  const device = query.get("device_id") || "";
  const q = query.get("q") || "";
  const page = Math.max(1, Number(query.get("page") || 1));
  const params = new URLSearchParams({ page, limit: LIMIT });
  if (status) params.set("status", status);
  if (device) params.set("device_id", device);
  if (q) params.set("q", q);
  const [doc, devices] = await Promise.all([get(`/edge/lineages?${params}`), all("/devices")]);

  const go = (changes) => {
    const next = new URLSearchParams({ status, device_id: device, q, ...changes });
    for (const [k, v] of [...next]) if (!v || (k === "page" && v === "1")) next.delete(k);
    location.hash = `#/lineages${next.toString() ? "?" + next : ""}`;
  };
  const form = h("form", { class: "filters", role: "search", id: "lineage-filters" },
    h("label", {}, "Search", h("input", { type: "search", name: "q", id: "filter-q", value: q,
      placeholder: "device, table, target, reason" })),
    h("label", {}, "Status", h("select", { name: "status", id: "filter-status" },
      [["", "any"], ...Object.values(LineageStatus).map((s) => [s, s])].map(([v, t]) =>
        h("option", { value: v, selected: v === status }, t)))),
    h("label", {}, "Device", h("select", { name: "device_id", id: "filter-device" },
      h("option", { value: "" }, "any"),
      devices.map((d) => h("option", { value: d.id, selected: d.id === device }, d.name)))),
    h("button", { type: "submit" }, "Apply"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    go({ q: f.get("q"), status: f.get("status"), device_id: f.get("device_id"), page: "1" });
  });
  for (const sel of form.querySelectorAll("select")) sel.addEventListener("change", () => form.requestSubmit());

  const total = doc.meta.total;
  const pages = Math.max(1, Math.ceil(total / LIMIT));
  clear(main,
    h("h1", {}, "Lineages"),
    form,
    h("p", { id: "lineage-count", class: "muted" }, `${num(total)} lineage${total === 1 ? "" : "s"}`
      + (q ? ` matching "${q}"` : "")),
    table("Lineages", [
      { label: "device", value: (l) => l.device_name },
      { label: "table", value: (l) => link(`#/lineages/${l.id}`, l.source_table) },
      { label: "pipeline", value: (l) => l.pipeline },
      { label: "status", value: (l) => pill(l.status) },
      { label: "pause reason", value: (l) => words(l.pause_reason) },
      { label: "staged rows", num: true, value: (l) => num(l.staged_rows) },
      { label: "row writes", num: true, value: (l) => num(l.materialized_rows) },
      { label: "errors", num: true, value: (l) => num(l.materialization_errors) },
      { label: "last batch", value: (l) => ago(l.last_batch_at) },
    ], doc.data, { empty: "none match" }),
    pages > 1 ? h("nav", { class: "bar", "aria-label": "Pages of lineages" },
      h("button", { type: "button", class: "secondary", disabled: page <= 1,
        onclick: () => go({ page: String(page - 1) }) }, "Previous"),
      h("span", {}, `page ${page} of ${pages}`),
      h("button", { type: "button", class: "secondary", disabled: page >= pages,
        onclick: () => go({ page: String(page + 1) }) }, "Next")) : null);
  return refreshOnEvents();
}

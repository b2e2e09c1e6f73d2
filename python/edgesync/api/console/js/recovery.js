// Recovery of a state (rows) lineage on its page (docs/recovery.md): the offers the
// lineage detail makes (`recovery_offers`, when the API carries them: a capture gap, a
// table recreated after a delete), a re-snapshot with an optional filter, a verification
// (with repair), and the jobs' progress from …/resnapshots and …/verifications, read
// again every 2 s while one is open (every 10 s otherwise).

import { ApiError, get, post } from "./api.js";
import { busy, clear, h, num, pill, say, table, when, words } from "./ui.js";
import { ResnapshotStatus, SchemaStatus, VerificationStatus } from "./vocabulary.js";

const OPEN = new Set([ResnapshotStatus.REQUESTED, ResnapshotStatus.RUNNING, VerificationStatus.REQUESTED]);
const OPS = [["eq", "="], ["ne", "≠"], ["lt", "<"], ["le", "≤"], ["gt", ">"], ["ge", "≥"],
  ["in", "in (comma-separated)"], ["is_null", "is null"], ["not_null", "is not null"]];
// Taken as offered (docs/recovery.md): a whole-table re-snapshot, a plain verification.
const LABEL = { resnapshot: "Re-snapshot the whole table", verify: "Verify the table" };
const REASON = { capture_gap: "capture gap", recreated_after_delete: "re-created after a delete" };

// The offers, each a line with the button that takes it; nothing when the field is absent.
export function offersBox(l) {
  const offers = (Array.isArray(l.recovery_offers) ? l.recovery_offers : [])
    .filter((o) => o && typeof o === "object");
  if (!offers.length) return null;
  // After a verification that found differences, the API's detail says to verify with
  // repair: the button does so.
  const last = (l.recovery || {}).verification;
  const repair = !!last && last.status === VerificationStatus.DIFFERENT;
  return h("section", { id: "recovery-offers", class: "note", "aria-labelledby": "offers-title" },
    h("h2", { id: "offers-title" }, "Recovery offered"),
    h("p", { class: "muted" }, "What the API says to do now for this table, and why (docs/recovery.md)."),
    h("ul", {}, offers.map((o, i) => {
      const since = Number.isFinite(o.since_ms) ? ` (since ${when(o.since_ms)})` : "";
      const what = `${REASON[o.reason] || words(o.reason)}${o.gap_id !== undefined && o.gap_id !== null ? ` (gap ${o.gap_id})` : ""}`;
      const known = Object.hasOwn(LABEL, o.action);
      const label = o.action === "verify" && repair ? "Verify with repair" : LABEL[o.action];
      return h("li", { id: `offer-${i}`, "data-action": String(o.action) },
        h("strong", {}, what), `: ${o.detail || ""}${since} `,
        known ? h("button", { type: "button", class: "secondary", "aria-label": `${label}: ${what}`,
          onclick: (ev) => busy(ev.target, async () => {
            try {
              const job = await start(l.id, o.action, o.action === "verify" && repair ? { repair: true } : {});
              say(`${job} requested for ${what}: the offer is back if it does not succeed`);
              window.dispatchEvent(new Event("console:reload"));
            } catch (e) { say(e.text || String(e), true); }
          }) }, label) : h("span", { class: "muted" }, `(${words(o.action)})`));
    })));
}

async function start(id, action, body) {
  const path = action === "verify" ? "verify" : "resnapshot";
  const { data } = await post(`/edge/lineages/${id}/${path}`, body);
  return `${path === "verify" ? "verification" : "re-snapshot"} ${data.id.slice(0, 8)}`;
}

// The section: the two forms and the jobs; `stale()` ends its polling with the page.
export function recoverySection(l, stale) {
  const jobs = h("div", { id: "recovery-jobs" });
  let last = null;
  let timer = null;
  const refresh = async () => {
    clearTimeout(timer);
    let open = false;
    try {
      const [rs, vs] = await Promise.all([get(`/edge/lineages/${l.id}/resnapshots?limit=5`),
        get(`/edge/lineages/${l.id}/verifications?limit=5`)]);
      open = [...rs.data, ...vs.data].some((j) => OPEN.has(j.status));
      const key = JSON.stringify([rs.data, vs.data]);
      if (key !== last) { last = key; showJobs(jobs, rs.data, vs.data); }
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      say(e.text, true);
    }
    if (!stale()) timer = setTimeout(refresh, open ? 2000 : 10000);
  };
  const element = h("section", { id: "recovery", "aria-labelledby": "recovery-title" },
    h("h2", { id: "recovery-title" }, "Re-snapshot and verify"),
    h("p", { class: "muted" }, "A re-snapshot asks the device to send the table's current rows again (merged "
      + "newer-wins with live changes; with no filter, rows the device no longer has are removed). A verification "
      + "compares a digest of the device's table with the mirror, bucket by bucket."),
    resnapshotForm(l, refresh), verifyForm(l, refresh), jobs);
  // start: the first read (awaited with the page's others), then the polling; resolves to
  // the cleanup that ends it.
  return { element, start: async () => { await refresh(); return () => clearTimeout(timer); } };
}

function columnsOf(l) {
  const approved = (l.schema_versions || []).find((v) => v.status === SchemaStatus.APPROVED);
  const cols = ((approved && approved.schema_columns) || {}).columns || [];
  const names = cols.map((c) => c.name);
  return names.length ? names : [...new Set((l.bindings || []).map((b) => b.source_column_name))];
}

// A typed value: JSON when it parses to a scalar (5, 2.5, true, "5"), else the text.
function scalar(text) {
  try {
    const v = JSON.parse(text);
    if (v === null || ["number", "string", "boolean"].includes(typeof v)) return v;
  } catch { /* plain text */ }
  return text;
}

function resnapshotForm(l, refresh) {
  const columns = columnsOf(l);
  const terms = h("div", { id: "filter-terms" });
  let n = 0;
  const addTerm = () => {
    const i = n++;
    const column = h("select", { id: `term-${i}-column`, class: "term-column" },
      columns.map((c) => h("option", { value: c }, c)));
    const op = h("select", { id: `term-${i}-op`, class: "term-op" }, OPS.map(([v, t]) => h("option", { value: v }, t)));
    const value = h("input", { id: `term-${i}-value`, class: "term-value", "aria-describedby": "filter-help" });
    op.addEventListener("change", () => { value.disabled = op.value === "is_null" || op.value === "not_null"; });
    const row = h("div", { class: "bar term", role: "group", "aria-label": `condition ${i + 1}` },
      h("label", {}, "Column", column), h("label", {}, "Operator", op), h("label", {}, "Value", value),
      h("button", { type: "button", class: "secondary", "aria-label": `remove condition ${i + 1}`,
        onclick: () => row.remove() }, "Remove"));
    terms.append(row);
    column.focus();
  };
  const read = () => [...terms.querySelectorAll(".term")].map((row) => {
    const t = { column: row.querySelector(".term-column").value, op: row.querySelector(".term-op").value };
    const raw = row.querySelector(".term-value").value.trim();
    if (t.op === "in") t.value = raw.split(",").map((s) => scalar(s.trim())).filter((s) => s !== "");
    else if (t.op !== "is_null" && t.op !== "not_null") t.value = scalar(raw);
    return t;
  });
  const error = h("p", { id: "resnapshot-error", class: "error-text", role: "alert" });
  const form = h("form", { id: "resnapshot-form", "aria-labelledby": "resnapshot-title" },
    h("h3", { id: "resnapshot-title" }, "Re-snapshot"),
    h("fieldset", {}, h("legend", {}, "Only the rows where every condition holds (none: the whole table)"),
      terms,
      h("p", { class: "muted", id: "filter-help" }, "A value is read as JSON when it is one (5, 2.5, true, \"5\"), else as text."),
      h("button", { type: "button", class: "secondary", id: "add-term", onclick: addTerm }, "Add condition")),
    error,
    h("div", { class: "bar" }, h("button", { type: "submit", id: "resnapshot" }, "Re-snapshot")));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    busy(form.querySelector("#resnapshot"), async () => {
      error.textContent = "";
      const where = read();
      try {
        const job = await start(l.id, "resnapshot", where.length ? { filter: { where } } : {});
        say(`${job} requested${where.length ? ` (${where.length} condition(s))` : " (whole table)"}`);
        await refresh();
      } catch (e) {
        if (!(e instanceof ApiError)) throw e;
        error.textContent = e.text;
        say(e.text, true);
      }
    });
  });
  return form;
}

function verifyForm(l, refresh) {
  const prefix = h("select", { id: "verify-prefix" },
    [[1, "16 buckets (1 hex digit)"], [2, "256 buckets (2 hex digits)"], [3, "4,096 buckets (3 hex digits)"]]
      .map(([v, t]) => h("option", { value: String(v), selected: v === 2 }, t)));
  const repair = h("input", { type: "checkbox", id: "verify-repair" });
  const error = h("p", { id: "verify-error", class: "error-text", role: "alert" });
  const form = h("form", { id: "verify-form", "aria-labelledby": "verify-title" },
    h("h3", { id: "verify-title" }, "Verify"),
    h("div", { class: "bar" }, h("label", {}, "Digest buckets", prefix),
      h("label", { class: "inline" }, repair, "Repair: re-snapshot the buckets that differ")),
    error,
    h("div", { class: "bar" }, h("button", { type: "submit", id: "verify" }, "Verify")));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    busy(form.querySelector("#verify"), async () => {
      error.textContent = "";
      try {
        const job = await start(l.id, "verify", { prefix: Number(prefix.value), repair: repair.checked });
        say(`${job} requested${repair.checked ? " with repair" : ""}`);
        await refresh();
      } catch (e) {
        if (!(e instanceof ApiError)) throw e;
        error.textContent = e.text;
        say(e.text, true);
      }
    });
  });
  return form;
}

function filterText(f) {
  if (!f || !Object.keys(f).length) return "whole table";
  const parts = (f.where || []).map((t) => `${t.column} ${t.op}${"value" in t ? ` ${JSON.stringify(t.value)}` : ""}`);
  if (f.key_range) parts.push(`key from ${JSON.stringify(f.key_range.from || {})} to ${JSON.stringify(f.key_range.to || {})}`);
  if (f.buckets) parts.push(`bucket(s) ${f.buckets.values.join(", ")}`);
  return parts.join("; ");
}

function showJobs(box, resnapshots, verifications) {
  clear(box,
    table("Re-snapshots", [
      { label: "status", value: (j) => pill(j.status) },
      { label: "rows", value: (j) => h("span", {}, h("span", { class: "rows-sent" }, num(j.rows_sent)), ` sent in ${num(j.chunks)} chunk(s)`) },
      { label: "filter", value: (j) => filterText(j.filter) },
      { label: "swept", num: true, value: (j) => num(j.swept_rows) },
      { label: "requested", value: (j) => `${when(j.created_at)}${j.verification_id ? " (repair)" : ""}` },
      { label: "completed", value: (j) => when(j.completed_at) },
      { label: "error", value: (j) => j.error || "-" },
    ], resnapshots, { empty: "none yet" }),
    table("Verifications", [
      { label: "status", value: (j) => pill(j.status) },
      { label: "device rows", num: true, value: (j) => num(j.device_rows) },
      { label: "cloud rows", num: true, value: (j) => num(j.cloud_rows) },
      { label: "differing buckets", value: (j) => j.differing_buckets === null ? "-"
        : j.differing_buckets.length ? j.differing_buckets.join(", ") : "none" },
      { label: "repair", value: (j) => !j.repair ? "no" : j.resnapshot_id ? "re-snapshot started" : "yes" },
      { label: "requested", value: (j) => when(j.created_at) },
      { label: "completed", value: (j) => when(j.completed_at) },
      { label: "error", value: (j) => j.error || "-" },
    ], verifications, { empty: "none yet" }));
}

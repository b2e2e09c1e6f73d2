// One lineage: its facts, schema history, bindings, replay progress, quarantined rows,
// staged and written rows; reset (breaker / materialization), reopen review, delete;
// re-snapshot and verify, and the recovery the API offers (../recovery.js).

import { ApiError, api, get, post } from "../api.js";
import { offersBox, recoverySection } from "../recovery.js";
import { busy, clear, confirmDialog, facts, h, link, num, pill, say, table, value, when, words } from "../ui.js";
import { LineageStatus, PauseReason, Pipeline, ReplayStatus, ReviewStatus } from "../vocabulary.js";

const ROWS = 100;

export async function render(main, { args: [id], stale }) {
  const [{ data: l }, reviews] = await Promise.all([
    get(`/edge/lineages/${id}`), get(`/edge/schema-reviews?lineage_id=${id}&limit=50`)]);
  const m = l.materialization;
  const rowsBox = h("section", { id: "rows", "aria-labelledby": "rows-title" });
  const quarantineBox = h("section", { id: "quarantine", "aria-labelledby": "quarantine-title" });
  const reload = () => window.dispatchEvent(new Event("console:reload"));

  const actions = [];
  if (m.error_count > 0 || m.failed_batches > 0 || l.pause_reason === PauseReason.CIRCUIT_BREAKER) {
    actions.push(h("button", { type: "button", id: "reset", onclick: (ev) => busy(ev.target, async () => {
      try {
        const { data } = await post(`/edge/lineages/${id}/reset-materialization`);
        say(`materialization reset: ${data.requeued_batches} batch(es) requeued`
          + (data.quarantined_rows ? `, ${data.quarantined_rows} quarantined row(s) kept` : ""));
        reload();
      } catch (e) { say(e.text || String(e), true); }
    }) }, "Reset materialization"));
  }
  if (l.pause_reason === PauseReason.DEFERRED_COLUMNS) {
    actions.push(h("button", { type: "button", class: "secondary", id: "reopen",
      onclick: (ev) => busy(ev.target, async () => {
        try {
          const { data } = await post(`/edge/lineages/${id}/reopen-review`);
          location.hash = `#/reviews/schema/${data.id}`;
        } catch (e) { say(e.text || String(e), true); }
      }) }, "Reopen review"));
  }
  actions.push(h("button", { type: "button", class: "danger", id: "delete", onclick: async (ev) => {
    const ok = await confirmDialog(`Delete lineage ${l.device_name} / ${l.source_table}?`,
      "This removes the cloud's sync state of the table (versions, reviews, bindings, staged rows). "
      + "The written table and its rows stay. The device starts the table over and its next batch "
      + "creates a new lineage waiting for review.", "Delete");
    if (!ok) { say("delete cancelled"); return; }
    await busy(ev.target, async () => {
      try {
        const { data } = await api("DELETE", `/edge/lineages/${id}`);
        const next = data && data.next_step; // the verification the new lineage will offer
        say(`lineage ${l.source_table} deleted: the device sends the table again as a new lineage`
          + (next && next.detail ? `; then: ${next.detail}` : ""));
        location.hash = "#/lineages";
      } catch (e) { say(e.text || String(e), true); }
    });
  } }, "Delete lineage…"));

  // Re-snapshot and verification are for state (rows) lineages only (the API says so too).
  const recovery = l.pipeline === Pipeline.ROWS ? recoverySection(l, stale) : null;
  const intents = l.replay.intents;
  const latest = intents[0];
  const replayed = latest ? latest.rows_replayed : 0;
  clear(main,
    h("p", {}, link("#/lineages", "← Lineages")),
    h("h1", {}, `${l.device_name} / ${l.source_table} `, pill(l.status)),
    nextStep(l, reviews.data),
    facts([
      ["pipeline", l.pipeline], ["pause reason", words(l.pause_reason)],
      ["target table", l.target_table || "-"], ["sync authority", words(l.sync_authority)],
      ["staged rows", `${num(l.staged_rows)} (${num(l.staged_bytes)} bytes)`],
      ["row writes", num(l.materialized_rows)], ["rows in the target now", num(l.target_rows)],
      ["rejected batches", num(l.rejected_batches)],
      ["last batch", when(l.last_batch_at)], ["created", when(l.created_at)],
      ["reviews", reviews.data.length ? reviews.data.map((r) =>
        [link(`#/reviews/schema/${r.id}`, `${r.status.replaceAll("_", " ")} (${r.schema_hash.slice(0, 8)})`), " "]) : "-"],
    ]),
    h("div", { class: "bar", role: "group", "aria-label": "Lineage actions" }, actions),
    offersBox(l),
    h("h2", {}, "Materialization"),
    m.error_count || m.failed_batches || m.quarantined_rows
      ? facts([["errors since reset", num(m.error_count)], ["last error", m.last_error || "-"],
               ["failed batches", `${num(m.failed_batches)} (${num(m.failed_rows)} rows)`],
               ["open quarantined rows", num(m.quarantined_rows)]])
      : h("p", { id: "materialization", class: "ok" }, "no errors"),
    h("h2", {}, "Replay"),
    h("p", { id: "replay-text" }, latest
      ? `latest replay: ${latest.status}, ${num(replayed)} rows replayed; `
      : "no replay yet; ",
      `${num(l.replay.pending_intents)} pending, ${num(l.replay.staged_batches)} staged batch(es) `
      + `(${num(l.replay.staged_rows)} rows) waiting`),
    // What is staged is what a *running* replay has left; after a finished one, rows staged
    // since wait for something else (a new review): a bar of done/(done+waiting) looked stuck.
    h("progress", { id: "replay-bar", value: replayed, "aria-label": "replay progress",
      max: Math.max(1, replayed + (latest && latest.status === ReplayStatus.PENDING ? l.replay.staged_rows : 0)) }),
    table("Recent replays", [
      { label: "status", value: (i) => pill(i.status) },
      { label: "rows", num: true, value: (i) => num(i.rows_replayed) },
      { label: "started", value: (i) => when(i.created_at) },
      { label: "completed", value: (i) => when(i.completed_at) },
      { label: "error", value: (i) => i.last_error || "-" },
    ], intents),
    recovery ? recovery.element : null,
    h("h2", {}, "Schema history"),
    table("Schema versions", [
      { label: "hash", value: (v) => h("code", {}, v.schema_hash.slice(0, 12)) },
      { label: "classification", value: (v) => words(v.classification) },
      { label: "status", value: (v) => pill(v.status) },
      { label: "columns", value: (v) => ((v.schema_columns || {}).columns || []).map((c) => c.name).join(", ") },
      { label: "change", value: (v) => Object.entries(v.diff || {}).filter(([, c]) => c && c.length)
        .map(([k, c]) => `${words(k)}: ${c.join(", ")}`).join("; ") || "-" },
      { label: "first seen", value: (v) => when(v.first_seen_at) },
    ], l.schema_versions),
    h("h2", {}, "Bindings"),
    table("Column bindings", [
      { label: "column", value: (b) => b.source_column_name },
      { label: "action", value: (b) => b.action },
      { label: "target column", value: (b) => b.mirror_column_name || "-" },
      { label: "type", value: (b) => b.target_type || "-" },
      { label: "schema", value: (b) => h("code", {}, b.schema_hash.slice(0, 8)) },
    ], l.bindings),
    h("h2", {}, "Retired columns"),
    h("p", { class: "muted" }, "Target columns an approval stopped writing (a column dropped, renamed, or retyped "
      + "under a new name): kept with their last values. Keep them, drop them by hand, or mirror a column to "
      + "them again in a later review (docs/governance.md)."),
    table("Retired columns", [
      { label: "target column", value: (c) => c.name },
      { label: "type", value: (c) => c.pg_type },
      { label: "from", value: (c) => c.source_column_name },
      { label: "retired by", value: (c) => h("code", {}, c.retired_by_schema_hash.slice(0, 12)) },
      { label: "retired", value: (c) => when(c.retired_at) },
    ], l.retired_columns || []),
    quarantineBox,
    rowsBox);
  const [, , done] = await Promise.all([showQuarantine(quarantineBox, id), showRows(rowsBox, l, "staged"),
    recovery ? recovery.start() : undefined]);
  return done;
}

async function showQuarantine(box, id) {
  const doc = await get(`/edge/lineages/${id}/quarantine?status=open&limit=100`);
  const act = (path, done) => (ev) => busy(ev.target, async () => {
    try {
      const { data } = await post(path);
      say(done(data));
      await showQuarantine(box, id);
    } catch (e) { say(e.text || String(e), true); }
  });
  clear(box, h("h2", { id: "quarantine-title" }, `Quarantine (${num(doc.meta.total)} open)`),
    doc.data.length ? h("div", { class: "bar" },
      h("button", { type: "button", class: "secondary", onclick: act(`/edge/lineages/${id}/quarantine/retry`,
        (d) => `retried ${d.retried}, failed ${d.failed}, superseded ${d.superseded}`) }, "Retry all")) : null,
    table("Quarantined rows", [
      { label: "id", value: (r) => r.id },
      { label: "op", value: (r) => r.op || "sample" },
      { label: "row", value: (r) => value(r.row) },
      { label: "reason", value: (r) => `${r.reason_code}: ${r.reason}` + (r.reason_field ? ` (${r.reason_field})` : "") },
      { label: "attempts", num: true, value: (r) => r.attempts },
      { label: "", value: (r) => h("span", { class: "bar" },
        h("button", { type: "button", class: "secondary", "aria-label": `retry row ${r.id}`,
          onclick: act(`/edge/lineages/${id}/quarantine/${r.id}/retry`, (d) => d.written
            ? `row ${d.id} written` : `row ${d.id} refused again: ${d.reason}`) }, "Retry"),
        h("button", { type: "button", class: "secondary", "aria-label": `discard row ${r.id}`,
          onclick: act(`/edge/lineages/${id}/quarantine/${r.id}/discard`,
            (d) => `${d.discarded_rows} row discarded`) }, "Discard")) },
    ], doc.data, { empty: "no open rows" }));
}

async function showRows(box, l, view) {
  const tabs = h("div", { class: "bar", role: "group", "aria-label": "Which rows" },
    [["staged", "Staged rows"], ["written", "Written rows"]].map(([v, label]) =>
      h("button", { type: "button", class: v === view ? null : "secondary", id: `rows-${v}`,
        "aria-pressed": String(v === view), onclick: () => showRows(box, l, v) }, label)));
  let body;
  try {
    if (view === "staged") {
      const doc = await get(`/edge/lineages/${l.id}/staged-rows?limit=${ROWS}`);
      body = [h("p", { class: "muted", id: "rows-source" }, `source: staged rows (${num(doc.meta.total)})`),
        rowTable("Staged rows", doc.data.map(spreadStaged), ["op", "commit_seq"], ["staging_reason", "staged_id"])];
    } else {
      const path = l.pipeline === Pipeline.TELEMETRY ? "telemetry" : "mirror-rows";
      const doc = await get(`/edge/lineages/${l.id}/${path}?limit=${ROWS}`);
      body = [h("p", { class: "muted", id: "rows-source" },
        `source: written ${l.pipeline === Pipeline.TELEMETRY ? "telemetry" : "state mirror"} ${l.target_table} (${num(doc.meta.total)})`),
        rowTable("Written rows", doc.data)];
    }
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 404) throw e;
    body = h("p", { class: "note", id: "rows-source" }, `nothing written yet: ${e.message}`);
  }
  clear(box, h("h2", { id: "rows-title" }, "Rows"), tabs, body);
}

// A staged operation as a flat row, as the TUI shows it: its row's values (a delete's key)
// as columns, not a JSON object in small monospace.
function spreadStaged(item) {
  const { row, pk, schema_hash: _hash, ...out } = item;
  const values = row && typeof row === "object" ? row : pk;
  for (const [k, v] of Object.entries(values || {})) if (!(k in out)) out[k] = v;
  return out;
}

function rowTable(caption, rows, first = [], last = []) {
  // The table's own columns first; edgesync's bookkeeping (device_id, _edge_*, ``last``) after.
  const system = (k) => k === "device_id" || k.startsWith("_edge") || last.includes(k);
  const keys = [...new Set([...first, ...rows.flatMap((r) => Object.keys(r))])]
    .filter((k) => rows.some((r) => r[k] !== undefined && r[k] !== null) || first.includes(k))
    .sort((a, b) => Number(system(a)) - Number(system(b)));
  const cell = (k, v) => (k === "schema_hash" && typeof v === "string" ? h("code", { title: v }, v.slice(0, 12)) : value(v));
  return table(caption, keys.map((k) => ({ label: k, value: (r) => cell(k, r[k]) })), rows);
}

// A paused lineage's next step, first on the page (it was a small link beside a red Delete):
// the review it waits for, or what its pause reason asks of the operator.
function nextStep(l, reviews) {
  if (l.status !== LineageStatus.PAUSED) return null;
  const open = reviews.find((r) => r.status === ReviewStatus.QUEUED || r.status === ReviewStatus.IN_REVIEW);
  const staged = `${num(l.staged_rows)} staged row(s) wait`;
  let body;
  if (l.pause_reason === PauseReason.SCHEMA_REVIEW && open) {
    body = [`Waiting for a schema review: ${staged} until it is decided. `,
      h("a", { href: `#/reviews/schema/${open.id}`, class: "button", id: "next-review" }, "Open the review")];
  } else if (l.pause_reason === PauseReason.BACKPRESSURE) {
    body = [`Paused by backpressure: ${staged}, over the project's cap. It resumes by itself once `
      + "the backlog drains below the policy's resume threshold; raise the caps on ",
      link("#/policy", "Policy"), " if the backlog is expected."];
  } else if (l.pause_reason === PauseReason.CIRCUIT_BREAKER) {
    body = ["Paused by the circuit breaker after repeated write errors: fix the target (see "
      + "Materialization below), then Reset materialization."];
  } else if (l.pause_reason === PauseReason.DEFERRED_COLUMNS) {
    body = ["Columns were deferred: reopen the review to decide them (Reopen review below)."];
  } else {
    body = [`Paused (${words(l.pause_reason)}): ${staged}.`];
  }
  return h("section", { class: "next-step", id: "next-step", "aria-label": "Next step" },
    h("p", {}, h("strong", {}, "Next step: "), ...body));
}

// One schema review or registry review: the column diff, per-column actions (prefilled from
// the review's suggested_column_actions: the last approval's decisions carried forward) with
// the API's live preview of the target table, claim / approve / reject (/ abandon). The
// preview's refusals are shown on their columns and keep Approve disabled: the approval runs
// the same check. Approve approves a queued review directly (claimed in the same
// transaction), so a refusal changes nothing; after any 409 the review is reloaded.

import { ApiError, get, post } from "../api.js";
import { busy, clear, confirmDialog, facts, h, link, pill, say, table, when, words } from "../ui.js";
import { ApiErrorCode, ColumnActionKind, Pipeline, ReviewStatus, SyncAuthority } from "../vocabulary.js";

// What a 409 said, shown again once the review is reloaded (the page is drawn anew).
let notice = null;

const TYPES = ["bigint", "double precision", "numeric", "text", "bytea", "boolean", "jsonb"];
const CHANGES = { added: "added", dropped: "dropped", type_changed: "type changed",
  pk_changed: "primary key changed", nullability_changed: "nullability changed" };

export async function render(main, { args: [kind, id] }) {
  const base = kind === "schema" ? "/edge/schema-reviews" : "/edge/registry-reviews";
  const [{ data: r }, points] = await Promise.all([get(`${base}/${id}`), get("/edge/data-points?limit=500")]);
  const lineage = kind === "schema" ? (await get(`/edge/lineages/${r.lineage_id}`)).data : null;
  const columns = (r.schema_columns || {}).columns || [];
  const decided = Object.fromEntries((r.column_actions || []).map((a) => [a.source_column_name, a]));
  const open = r.status === ReviewStatus.QUEUED || r.status === ReviewStatus.IN_REVIEW;
  const conflict = h("div", { id: "conflict", role: "alert" });
  const reload = () => window.dispatchEvent(new Event("console:reload"));

  // One decision at the action_version shown. Approve needs no claim first: a queued
  // review is claimed and approved in one transaction, so a refused one stays as it was.
  async function decide(button, verb, body, done) {
    await busy(button, async () => {
      try {
        await post(`${base}/${id}/${verb}`, { action_version: r.action_version, ...body });
        say(done);
        reload();
      } catch (e) {
        if (e instanceof ApiError && e.status === 409) {
          // Someone acted meanwhile, or the approval was refused because of what exists:
          // either way what this page shows may be stale. Reload it, and say why.
          notice = { text: e.text, stale: e.code === ApiErrorCode.ACTION_VERSION_CONFLICT };
          say(e.text, true);
          reload();
        } else {
          say(e instanceof ApiError ? e.text : String(e), true);
        }
      }
    });
  }
  if (notice) {
    const n = notice;
    notice = null;
    clear(conflict, h("div", { class: "alert" },
      h("p", {}, n.stale ? "This review changed since you loaded it (someone else claimed or decided it): "
        + "it was reloaded; decide again." : "The approval was refused; the review was reloaded as it is now.",
      " ", h("span", { id: "conflict-text" }, n.text)),
      h("button", { type: "button", id: "conflict-reload", onclick: () => { say("review reloaded"); reload(); } }, "Reload review")));
  }

  const form = open ? actionForm(kind, columns, points.data, r.suggested_column_actions || []) : null;
  const preview = h("section", { class: "preview", id: "preview", "aria-live": "polite",
    "aria-labelledby": "preview-title" });
  let seq = 0;
  let timer = null;
  async function refreshPreview() {
    const mine = ++seq;
    setApprove(false);
    try {
      const { data } = await post(`${base}/${id}/preview`, { column_actions: form.actions() });
      if (mine !== seq) return;
      showPreview(preview, data);
      form.showRefusals(data.refusals);
      setApprove(!data.refusals.length);
    } catch (e) {
      if (mine !== seq) return;
      if (!(e instanceof ApiError) || e.status >= 500 || e.status === 401) throw e;
      clear(preview, h("h2", { id: "preview-title" }, "Preview of the target"),
        h("p", { class: "bad", id: "preview-error" }, `refused: HTTP ${e.status} ${e.text}`));
      form.showRefusals(e.refusals, e.field);
    }
  }
  if (form) form.el.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(refreshPreview, 250); });
  // Approve waits for a preview without refusals (the approval would refuse what it lists).
  let approveButton = null;
  function setApprove(ok) {
    if (!approveButton) return;
    approveButton.disabled = !ok;
    approveButton.title = ok ? "" : "fix the refused columns first (see the preview)";
  }

  const authority = kind === "schema" && lineage.pipeline === Pipeline.ROWS && open
    ? h("div", { class: "filters" }, h("label", {}, "Sync authority", h("select", { id: "sync-authority" },
      h("option", { value: "" }, "device authoritative (default)"),
      h("option", { value: SyncAuthority.CLOUD }, "cloud authoritative (allows write-back)"))))
    : null;
  const buttons = [];
  if (r.status === ReviewStatus.QUEUED) {
    buttons.push(h("button", { type: "button", class: "secondary", id: "claim", onclick: (ev) =>
      decide(ev.target, "claim", {}, "review claimed") }, "Claim"));
  }
  if (open) {
    approveButton = h("button", { type: "button", id: "approve", disabled: true, onclick: (ev) => {
      const body = { column_actions: form.actions() };
      if (authority && authority.querySelector("select").value) body.sync_authority = authority.querySelector("select").value;
      decide(ev.target, "approve", body, "review approved");
    } }, "Approve");
    buttons.push(approveButton);
    const refuse = (verb, title) => async (ev) => {
      const reason = await confirmDialog(title, "The devices' rows stay staged.", words(verb),
        { input: { label: "Reason" } });
      if (reason === null) { say(`${verb} cancelled`); return; }
      decide(ev.target, verb, reason ? { reason } : {}, `review ${verb === "abandon" ? "abandoned" : "rejected"}`);
    };
    buttons.push(h("button", { type: "button", class: "danger", id: "reject",
      onclick: refuse("reject", "Reject this schema?") }, "Reject…"));
    if (kind === "registry") {
      buttons.push(h("button", { type: "button", class: "secondary", id: "abandon",
        onclick: refuse("abandon", "Abandon: one device review per waiting device?") }, "Abandon…"));
    }
  }

  clear(main,
    h("p", {}, link("#/reviews", "← Reviews"), lineage ? [" · ", link(`#/lineages/${lineage.id}`, "lineage")] : null),
    h("h1", {}, `${kind === "schema" ? "Schema" : "Registry"} review: ${r.source_table} `, pill(r.status)),
    facts([
      lineage ? ["device", lineage.device_name] : ["scope", r.scope],
      ["pipeline", lineage ? lineage.pipeline : r.pipeline],
      ["classification", words(r.classification)], ["schema", h("code", {}, r.schema_hash)],
      ["action version", String(r.action_version)], ["claimed by", r.claimed_by || "-"],
      ["decided by", r.decided_by || "-"], r.decision_reason ? ["reason", r.decision_reason] : null,
      kind === "registry" ? ["waiting devices", String((r.devices || []).length)] : null,
      ["created", when(r.created_at)],
    ]),
    conflict,
    h("h2", {}, kind === "schema" ? "Columns and diff against the approved schema" : "Columns"),
    diffTable(r, columns, decided),
    form ? [h("h2", {}, "Column actions"), form.el] : null,
    form ? preview : null,
    authority,
    buttons.length ? h("div", { class: "bar", role: "group", "aria-label": "Decision" }, buttons) : null);
  if (form) await refreshPreview();
}

function diffTable(r, columns, decided) {
  const changes = {};
  // A type change says from what to what: the approved schema's affinity → this one's.
  const before = Object.fromEntries((r.approved_schema_columns || []).map((c) => [c.name, c]));
  const now = Object.fromEntries(columns.map((c) => [c.name, c]));
  const word = (k, c) => (k === "type_changed" && before[c] && now[c]
    ? `type changed (${before[c].decl_type_affinity} → ${now[c].decl_type_affinity})` : CHANGES[k] || k);
  for (const [k, cols] of Object.entries(r.diff || {})) for (const c of cols || []) (changes[c] ||= []).push(word(k, c));
  const names = [...columns.map((c) => c.name), ...Object.keys(changes).filter((n) => !columns.some((c) => c.name === n))];
  const by = Object.fromEntries(columns.map((c) => [c.name, c]));
  return table("Schema columns", [
    { label: "column", value: (n) => n },
    { label: "type affinity", value: (n) => (by[n] || {}).decl_type_affinity || "-" },
    { label: "primary key", value: (n) => (by[n] ? (by[n].pk_ordinal ? "yes" : "no") : "-") },
    { label: "not null", value: (n) => (by[n] ? (by[n].not_null ? "yes" : "no") : "-") },
    { label: "change", value: (n) => (r.diff ? (changes[n] || ["unchanged"]).join(", ") : "-") },
    { label: "decided", value: (n) => actionWords(decided[n]) },
  ], names, { rowClass: (n) => (changes[n] ? "changed" : null) });
}

function actionWords(a) {
  if (!a) return "-";
  if (a.action !== ColumnActionKind.MIRROR) return a.action.replaceAll("_", " ");
  return "mirror" + (a.mirror_column_name && a.mirror_column_name !== a.source_column_name ? ` as ${a.mirror_column_name}` : "")
    + (a.target_type ? ` (${a.target_type})` : "");
}

// The per-column form: an action each, and the fields that action takes, prefilled from the
// review's suggestions; each row says whether its action was carried from the last approval,
// is new, or needs a decision, and shows the preview's refusal of the column with its fix.
const SUGGESTION_WORDS = { carried: "carried", new: "new", needs_decision: "needs decision" };

function actionForm(kind, columns, points, suggestions) {
  const choices = [ColumnActionKind.MIRROR, ColumnActionKind.IGNORE, ...(kind === "schema" ? [ColumnActionKind.DEFER] : []), ColumnActionKind.MAP, ColumnActionKind.AUTO_CREATE_AND_MAP];
  const suggested = Object.fromEntries(suggestions.map((s) => [s.source_column_name, s]));
  const rows = columns.map((c) => {
    const n = c.name;
    const s = suggested[n] || null;
    const action = h("select", { "aria-label": `action for ${n}`, id: `action-${n}`, "data-column": n },
      choices.map((a) => h("option", { value: a }, words(a))));
    const rename = h("input", { type: "text", "aria-label": `target column name for ${n}`, id: `rename-${n}`, placeholder: n });
    const type = h("select", { "aria-label": `target type for ${n}`, id: `type-${n}` },
      h("option", { value: "" }, "inferred"), TYPES.map((t) => h("option", { value: t }, t)));
    const point = h("select", { "aria-label": `data point for ${n}`, id: `point-${n}` },
      points.length ? points.map((p) => h("option", { value: p.id }, `${p.name} (${p.value_type})`))
        : h("option", { value: "" }, "no data points in the project"));
    const pointName = h("input", { type: "text", "aria-label": `new data point name for ${n}`, id: `point-name-${n}`, placeholder: n });
    if (s && choices.includes(s.action)) {
      action.value = s.action;
      if (s.mirror_column_name) rename.value = s.mirror_column_name;
      if (s.target_type) type.value = s.target_type;
      if (s.device_data_point_id) point.value = s.device_data_point_id;
      if (s.data_point_name) pointName.value = s.data_point_name;
    }
    const sync = () => {
      const a = action.value;
      rename.hidden = type.hidden = a !== ColumnActionKind.MIRROR;
      point.hidden = a !== ColumnActionKind.MAP;
      pointName.hidden = a !== ColumnActionKind.AUTO_CREATE_AND_MAP;
    };
    action.addEventListener("change", sync);
    sync();
    const refusal = h("td", { id: `refusal-${n}`, class: "bad", "aria-live": "polite" });
    const origin = h("td", { id: `suggestion-${n}`, class: s && s.suggestion === "needs_decision" ? "warn" : null },
      s ? h("span", { title: s.reason }, SUGGESTION_WORDS[s.suggestion] || s.suggestion, h("br"),
        h("small", { class: "muted" }, s.reason)) : "-");
    const tr = h("tr", {}, h("td", {}, n), h("td", {}, c.decl_type_affinity || "-"), origin, h("td", {}, action),
      h("td", {}, rename, type, point, pointName), refusal);
    const value = () => {
      const a = { source_column_name: n, action: action.value };
      if (a.action === ColumnActionKind.MIRROR) {
        if (rename.value.trim() && rename.value.trim() !== n) a.mirror_column_name = rename.value.trim();
        if (type.value) a.target_type = type.value;
      } else if (a.action === ColumnActionKind.MAP) {
        a.device_data_point_id = point.value || null;
      } else if (a.action === ColumnActionKind.AUTO_CREATE_AND_MAP && pointName.value.trim()) {
        a.data_point_name = pointName.value.trim();
      }
      return a;
    };
    const field = { mirror_column_name: rename, target_type: type, device_data_point_id: point,
      data_point_name: pointName };
    return { n, tr, value, refusal, all: [action, rename, type, point, pointName], field: (f) => field[f] || action };
  });
  // Each refusal on its column (the field it names marked invalid), with its fix; a 422 of
  // the request's shape names only `column_actions[i].field`.
  const showRefusals = (refusals, field = null) => {
    for (const x of rows) {
      for (const e of x.all) e.removeAttribute("aria-invalid");
      clear(x.refusal);
    }
    const mark = (name) => {
      const m = /^column_actions\[(\d+)\]\.?(\w*)/.exec(name || "");
      if (m && rows[Number(m[1])]) rows[Number(m[1])].field(m[2]).setAttribute("aria-invalid", "true");
    };
    for (const f of refusals || []) {
      const row = rows.find((x) => x.n === f.source_column_name);
      if (row) row.refusal.append(h("p", {}, h("strong", {}, words(f.code)), `: ${f.detail}`),
        h("p", { class: "fix" }, `fix: ${f.fix}`));
      mark(f.field);
    }
    mark(field);
  };
  const el = h("form", { id: "actions", onsubmit: (ev) => ev.preventDefault() },
    h("table", {}, h("caption", { class: "muted" }, "One action per source column"),
      h("thead", {}, h("tr", {}, ["column", "type affinity", "suggested", "action", "options", "refused"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, rows.map((x) => x.tr))));
  return { el, actions: () => rows.map((x) => x.value()), showRefusals };
}

function showPreview(box, p) {
  clear(box, h("h2", { id: "preview-title" }, "Preview of the target"),
    facts([["target table", h("code", { id: "preview-table" }, p.target_table)], ["pipeline", p.pipeline]]),
    table("Target columns", [
      { label: "target column", value: (c) => c.target_column_name },
      { label: "type", value: (c) => c.pg_type },
      { label: "primary key", value: (c) => (c.primary_key ? "yes" : "") },
      { label: "from", value: (c) => c.source_column_name },
    ], p.columns),
    p.data_points.length ? table("Data points fed", [
      { label: "column", value: (d) => d.source_column_name },
      { label: "action", value: (d) => words(d.action) },
      { label: "data point", value: (d) => d.data_point_name || d.device_data_point_id },
    ], p.data_points) : null,
    h("p", { id: "preview-ignored" }, `not synced: ${p.ignored.length ? p.ignored.join(", ") : "none"}`),
    h("p", { id: "preview-retired", class: p.retired_columns.length ? "warn" : null },
      "no longer written (kept with their last values): ",
      p.retired_columns.length ? p.retired_columns.map((c) => `${c.name} (${c.pg_type}, from ${c.source_column_name})`).join(", ") : "none"),
    h("p", { id: "preview-refusals", class: p.refusals.length ? "bad" : null },
      p.refusals.length ? `refused: ${p.refusals.length} column(s) — see "refused" above; Approve stays disabled until they are fixed`
        : "the approval would pass"),
    p.deferred.length ? h("p", { id: "preview-deferred", class: "warn" },
      `deferred (the lineage stays paused until decided): ${p.deferred.join(", ")}`) : null);
}

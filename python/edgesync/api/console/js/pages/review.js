// One schema review or registry review: the column diff, per-column actions with the API's
// live preview of the target table, claim / approve / reject (/ abandon). A decision names
// the action_version shown; a stale one (409 ACTION_VERSION_CONFLICT) asks for a reload.

import { ApiError, get, post } from "../api.js";
import { busy, clear, confirmDialog, facts, h, link, pill, say, table, when, words } from "../ui.js";

const TYPES = ["bigint", "double precision", "numeric", "text", "bytea", "boolean", "jsonb"];
const CHANGES = { added: "added", dropped: "dropped", type_changed: "type changed",
  pk_changed: "primary key changed", nullability_changed: "nullability changed" };

export async function render(main, { args: [kind, id] }) {
  const base = kind === "schema" ? "/edge/schema-reviews" : "/edge/registry-reviews";
  const [{ data: r }, points] = await Promise.all([get(`${base}/${id}`), get("/edge/data-points?limit=500")]);
  const lineage = kind === "schema" ? (await get(`/edge/lineages/${r.lineage_id}`)).data : null;
  const columns = (r.schema_columns || {}).columns || [];
  const decided = Object.fromEntries((r.column_actions || []).map((a) => [a.source_column_name, a]));
  const open = r.status === "queued" || r.status === "in_review";
  const conflict = h("div", { id: "conflict", role: "alert" });
  const reload = () => window.dispatchEvent(new Event("console:reload"));

  // One decision at the action_version shown.
  async function decide(button, verb, body, done) {
    await busy(button, async () => {
      try {
        let version = r.action_version;
        if (verb === "approve" && r.status === "queued") { // approving claims first
          version = (await post(`${base}/${id}/claim`, { action_version: version })).data.action_version;
        }
        await post(`${base}/${id}/${verb}`, { action_version: version, ...body });
        say(done);
        reload();
      } catch (e) {
        if (e instanceof ApiError && e.code === "ACTION_VERSION_CONFLICT") {
          clear(conflict, h("div", { class: "alert" },
            h("p", {}, "This review changed since you loaded it (someone else claimed or decided it): ",
              "reload it and decide again."),
            h("button", { type: "button", id: "conflict-reload", onclick: () => { say("review reloaded"); reload(); } }, "Reload review")));
          conflict.querySelector("button").focus();
          say(e.text, true);
        } else {
          say(e instanceof ApiError ? e.text : String(e), true);
        }
      }
    });
  }

  const form = open ? actionForm(kind, columns, points.data) : null;
  const preview = h("section", { class: "preview", id: "preview", "aria-live": "polite",
    "aria-labelledby": "preview-title" });
  let seq = 0;
  let timer = null;
  async function refreshPreview() {
    const mine = ++seq;
    try {
      const { data } = await post(`${base}/${id}/preview`, { column_actions: form.actions() });
      if (mine !== seq) return;
      showPreview(preview, data);
      form.markInvalid(null);
    } catch (e) {
      if (mine !== seq) return;
      if (!(e instanceof ApiError) || e.status >= 500 || e.status === 401) throw e;
      clear(preview, h("h2", { id: "preview-title" }, "Preview of the target"),
        h("p", { class: "bad", id: "preview-error" }, `refused: HTTP ${e.status} ${e.text}`));
      form.markInvalid(e.field);
    }
  }
  if (form) form.el.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(refreshPreview, 250); });

  const authority = kind === "schema" && lineage.pipeline === "rows" && open
    ? h("div", { class: "filters" }, h("label", {}, "Sync authority", h("select", { id: "sync-authority" },
      h("option", { value: "" }, "device authoritative (default)"),
      h("option", { value: "cloud_authoritative" }, "cloud authoritative (allows write-back)"))))
    : null;
  const buttons = [];
  if (r.status === "queued") {
    buttons.push(h("button", { type: "button", class: "secondary", id: "claim", onclick: (ev) =>
      decide(ev.target, "claim", {}, "review claimed") }, "Claim"));
  }
  if (open) {
    buttons.push(h("button", { type: "button", id: "approve", onclick: (ev) => {
      const body = { column_actions: form.actions() };
      if (authority && authority.querySelector("select").value) body.sync_authority = authority.querySelector("select").value;
      decide(ev.target, "approve", body, "review approved");
    } }, "Approve"));
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
  for (const [k, cols] of Object.entries(r.diff || {})) for (const c of cols || []) (changes[c] ||= []).push(CHANGES[k] || k);
  const names = [...columns.map((c) => c.name), ...Object.keys(changes).filter((n) => !columns.some((c) => c.name === n))];
  const by = Object.fromEntries(columns.map((c) => [c.name, c]));
  return table("Schema columns", [
    { label: "column", value: (n) => n },
    { label: "type affinity", value: (n) => (by[n] || {}).decl_type_affinity || "-" },
    { label: "primary key", value: (n) => (by[n] || {}).pk_ordinal || "-" },
    { label: "not null", value: (n) => (by[n] ? String(!!by[n].not_null) : "-") },
    { label: "change", value: (n) => (r.diff ? (changes[n] || ["unchanged"]).join(", ") : "-") },
    { label: "decided", value: (n) => actionWords(decided[n]) },
  ], names, { rowClass: (n) => (changes[n] ? "changed" : null) });
}

function actionWords(a) {
  if (!a) return "-";
  if (a.action !== "mirror") return a.action.replaceAll("_", " ");
  return "mirror" + (a.mirror_column_name && a.mirror_column_name !== a.source_column_name ? ` as ${a.mirror_column_name}` : "")
    + (a.target_type ? ` (${a.target_type})` : "");
}

// The per-column form: an action each, and the fields that action takes.
function actionForm(kind, columns, points) {
  const choices = ["mirror", "ignore", ...(kind === "schema" ? ["defer"] : []), "map", "auto_create_and_map"];
  const rows = columns.map((c) => {
    const n = c.name;
    const action = h("select", { "aria-label": `action for ${n}`, id: `action-${n}`, "data-column": n },
      choices.map((a) => h("option", { value: a }, words(a))));
    const rename = h("input", { type: "text", "aria-label": `target column name for ${n}`, id: `rename-${n}`, placeholder: n });
    const type = h("select", { "aria-label": `target type for ${n}`, id: `type-${n}` },
      h("option", { value: "" }, "inferred"), TYPES.map((t) => h("option", { value: t }, t)));
    const point = h("select", { "aria-label": `data point for ${n}`, id: `point-${n}` },
      points.length ? points.map((p) => h("option", { value: p.id }, `${p.name} (${p.value_type})`))
        : h("option", { value: "" }, "no data points in the project"));
    const pointName = h("input", { type: "text", "aria-label": `new data point name for ${n}`, id: `point-name-${n}`, placeholder: n });
    const sync = () => {
      const a = action.value;
      rename.hidden = type.hidden = a !== "mirror";
      point.hidden = a !== "map";
      pointName.hidden = a !== "auto_create_and_map";
    };
    action.addEventListener("change", sync);
    sync();
    const tr = h("tr", {}, h("td", {}, n), h("td", {}, c.decl_type_affinity || "-"), h("td", {}, action),
      h("td", {}, rename, type, point, pointName));
    const value = () => {
      const a = { source_column_name: n, action: action.value };
      if (a.action === "mirror") {
        if (rename.value.trim() && rename.value.trim() !== n) a.mirror_column_name = rename.value.trim();
        if (type.value) a.target_type = type.value;
      } else if (a.action === "map") {
        a.device_data_point_id = point.value || null;
      } else if (a.action === "auto_create_and_map" && pointName.value.trim()) {
        a.data_point_name = pointName.value.trim();
      }
      return a;
    };
    const field = { mirror_column_name: rename, target_type: type, device_data_point_id: point,
      data_point_name: pointName };
    return { tr, value, all: [action, rename, type, point, pointName], field: (f) => field[f] || action };
  });
  // The preview's 422 names `column_actions[i].field`: that input is marked invalid.
  const markInvalid = (name) => {
    for (const x of rows) for (const e of x.all) e.removeAttribute("aria-invalid");
    const m = /^column_actions\[(\d+)\]\.?(\w*)/.exec(name || "");
    if (m && rows[Number(m[1])]) rows[Number(m[1])].field(m[2]).setAttribute("aria-invalid", "true");
  };
  const el = h("form", { id: "actions", onsubmit: (ev) => ev.preventDefault() },
    h("table", {}, h("caption", { class: "muted" }, "One action per source column"),
      h("thead", {}, h("tr", {}, ["column", "type affinity", "action", "options"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, rows.map((x) => x.tr))));
  return { el, actions: () => rows.map((x) => x.value()), markInvalid };
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
    p.deferred.length ? h("p", { id: "preview-deferred", class: "warn" },
      `deferred (the lineage stays paused until decided): ${p.deferred.join(", ")}`) : null);
}

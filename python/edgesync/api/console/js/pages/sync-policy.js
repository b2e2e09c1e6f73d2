// One sync policy: edit its strategies (Save raises the version and sends the devices it
// governs a sync_policy control), see and change what it is attached to (attachments.js),
// see whether each device's agent acknowledged the latest version, delete it. The
// attachments and the governed devices are read again every 2 s.

import { ApiError, all, api, get, postBytes } from "../api.js";
import { attachmentsSection, showAttachments } from "../attachments.js";
import { policyTables, strategyEditor, summary } from "../strategies.js";
import { busy, clear, confirmDialog, facts, h, link, num, say, table, when } from "../ui.js";

const EVERY_MS = 2000;

export async function render(main, { args: [id], stale }) {
  const [{ data: policy }, devices, fleets] = await Promise.all([
    get(`/edge/sync-policies/${id}`), all("/devices"), all("/fleets")]);
  const attachedBox = h("div", { id: "attachment-list" });
  const governedBox = h("section", { id: "governed", "aria-labelledby": "governed-title" });
  const show = async (last) => {
    const [{ data: attached }, { data: governed }] = await Promise.all([
      get(`/edge/sync-policies/${policy.id}/attachments`), get(`/edge/sync-policies/${policy.id}/devices`)]);
    return [showAttachments(attachedBox, policy, attached, fleets, last[0]),
      showGoverned(governedBox, governed, devices, last[1])];
  };
  // Filled before the page is shown: the page appears whole.
  let last = await show([null, null]);
  clear(main,
    h("p", {}, link("#/sync-policies", "← Sync policies")),
    h("h1", {}, `Sync policy ${policy.name}`),
    facts([["version", num(policy.version)], ["tables", summary(policy.table_strategies)],
      ["description", policy.description || "-"], ["updated", when(policy.updated_at)],
      ["created", when(policy.created_at)]]),
    h("h2", { id: "edit-title" }, "Table strategies"),
    editForm(policy),
    attachmentsSection(attachedBox, policy, devices, fleets),
    governedBox,
    h("h2", {}, "Delete"),
    h("div", { class: "bar" }, h("button", { type: "button", class: "danger", id: "delete-policy",
      onclick: (ev) => remove(ev.target, policy) }, "Delete sync policy…")));
  let timer = null;
  const tick = async () => {
    try {
      last = await show(last);
    } catch (e) {
      say(e.text || String(e), true);
    }
    if (!stale()) timer = setTimeout(tick, EVERY_MS);
  };
  timer = setTimeout(tick, EVERY_MS);
  return () => clearTimeout(timer);
}

function editForm(policy) {
  const name = h("input", { id: "edit-policy-name", value: policy.name, required: true, maxlength: "200" });
  const description = h("input", { id: "edit-policy-description", value: policy.description, maxlength: "2000" });
  let sample = policy.sample_tables;
  let editor = strategyEditor(policyTables(policy), policy.table_strategies);
  const editorBox = h("div", {}, editor.element);
  const file = h("input", { type: "file", id: "edit-sample-file", accept: ".db,.sqlite,.sqlite3",
    "aria-describedby": "edit-sample-error" });
  const fileError = h("p", { id: "edit-sample-error", class: "error-text", role: "alert" });
  const error = h("p", { id: "edit-policy-error", class: "error-text", role: "alert" });
  file.addEventListener("change", () => busy(file, async () => {
    fileError.textContent = "";
    const f = file.files && file.files[0];
    if (!f) return;
    try {
      const { data } = await postBytes("/edge/sync-policies/introspect", await f.arrayBuffer());
      // The strategies chosen so far stay; a table new in this sample starts as suggested.
      const now = editor.read();
      const start = Object.fromEntries(data.tables.map((t) => [t.name, now[t.name] || t.suggested]));
      editor = strategyEditor(data.tables, start);
      sample = data.sample_tables;
      clear(editorBox, editor.element);
      say(`${f.name}: ${data.tables.length} table(s) read; Save keeps it as the policy's sample`);
    } catch (e) {
      fileError.textContent = e instanceof ApiError ? e.message : String(e);
      say(fileError.textContent, true);
    }
  }));
  const form = h("form", { id: "edit-policy", "aria-labelledby": "edit-title" },
    h("div", { class: "bar" }, h("label", {}, "Name", name), h("label", {}, "Description", description)),
    editorBox,
    h("div", { class: "field" }, h("label", {}, "Read the tables of another sample database (optional)", file), fileError),
    error,
    h("div", { class: "bar" }, h("button", { type: "submit", id: "save-policy" }, "Save")));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    busy(form.querySelector("#save-policy"), async () => {
      error.textContent = "";
      try {
        const { data } = await api("PATCH", `/edge/sync-policies/${policy.id}`, {
          name: name.value.trim(), description: description.value.trim(),
          table_strategies: editor.read(), sample_tables: sample });
        say(`sync policy ${data.name} saved: version ${data.version}`
          + (canonical(data.table_strategies) !== canonical(policy.table_strategies)
            ? "; its devices are sent the change" : ""));
        window.dispatchEvent(new Event("console:reload"));
      } catch (e) {
        if (!(e instanceof ApiError)) throw e;
        error.textContent = e.text;
        say(e.text, true);
      }
    });
  });
  return form;
}

// JSON with sorted keys: the server's jsonb does not keep the order the page sent.
function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object") return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(",")}}`;
  return JSON.stringify(v);
}

// Each device the policy governs, how (its own attachment or its fleet's), and the
// delivery of the latest version to its agent. Detach is in the attachments above.
function showGoverned(box, data, devices, last) {
  const key = JSON.stringify(data);
  if (key === last) return last; // unchanged: the focus stays where it is
  const byId = Object.fromEntries(devices.map((d) => [d.id, d]));
  const delivery = (d) => d.delivery === null ? "not sent"
    : d.delivery === "acked" ? `version ${d.delivered_version} acknowledged` : `version ${d.delivered_version} sent, not acknowledged yet`;
  clear(box, h("h2", { id: "governed-title" }, `Devices it governs (${data.length})`),
    h("p", { class: "muted" }, "A device's own attachment wins over its fleet's. Acknowledged: the agent received "
      + "the version; it applies it where its YAML has remote_policy: true."),
    table("Governed devices", [
      { label: "device", value: (d) => link(`#/devices/${d.device_id}`, d.name) },
      { label: "attached via", value: (d) => d.attached_via === "fleet"
        ? `fleet ${(byId[d.device_id] || {}).fleet || ""}` : "device" },
      { label: "delivery", value: (d) => h("span", { class: d.delivery === "acked" ? "ok" : "warn" }, delivery(d)) },
      { label: "acknowledged", value: (d) => when(d.acked_at) },
    ], data, { empty: "not attached to any device or fleet with devices" }));
  return key;
}

async function remove(button, policy) {
  const ok = await confirmDialog(`Delete sync policy ${policy.name}?`,
    "Its devices fall back to their fleet's policy, or to none: agents that applied it go back to their "
    + "YAML's table_strategies.", "Delete");
  if (!ok) { say("delete cancelled"); return; }
  await busy(button, async () => {
    try {
      await api("DELETE", `/edge/sync-policies/${policy.id}`);
      say(`sync policy ${policy.name} deleted`);
      location.hash = "#/sync-policies";
    } catch (e) { say(e.text || String(e), true); }
  });
}

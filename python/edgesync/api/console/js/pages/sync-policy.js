// One sync policy: edit its strategies (Save raises the version and sends the devices it
// governs a sync_policy control), attach it to a device or a fleet, see whether each
// device's agent acknowledged the latest version (read again every 2 s), delete it.

import { ApiError, all, api, get, post, postBytes } from "../api.js";
import { policyTables, strategyEditor, summary } from "../strategies.js";
import { busy, clear, confirmDialog, facts, h, link, num, say, table, when } from "../ui.js";

const EVERY_MS = 2000;

export async function render(main, { args: [id], stale }) {
  const [{ data: policy }, devices] = await Promise.all([get(`/edge/sync-policies/${id}`), all("/devices")]);
  const fleets = [...new Map(devices.filter((d) => d.fleet_id).map((d) => [d.fleet_id, d.fleet])).entries()];
  const governedBox = h("section", { id: "governed", "aria-labelledby": "governed-title" });
  // Filled before the page is shown: the page appears whole.
  let last = await showGoverned(governedBox, policy, devices, null);
  clear(main,
    h("p", {}, link("#/sync-policies", "← Sync policies")),
    h("h1", {}, `Sync policy ${policy.name}`),
    facts([["version", num(policy.version)], ["tables", summary(policy.table_strategies)],
      ["description", policy.description || "-"], ["updated", when(policy.updated_at)],
      ["created", when(policy.created_at)]]),
    h("h2", { id: "edit-title" }, "Table strategies"),
    editForm(policy),
    governedBox,
    attachForms(policy, devices, fleets),
    h("h2", {}, "Delete"),
    h("div", { class: "bar" }, h("button", { type: "button", class: "danger", id: "delete-policy",
      onclick: (ev) => remove(ev.target, policy) }, "Delete sync policy…")));
  let timer = null;
  const tick = async () => {
    try {
      last = await showGoverned(governedBox, policy, devices, last);
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

async function showGoverned(box, policy, devices, last) {
  const { data } = await get(`/edge/sync-policies/${policy.id}/devices`);
  const key = JSON.stringify(data);
  if (key === last) return last; // unchanged: the focus stays where it is
  const byId = Object.fromEntries(devices.map((d) => [d.id, d]));
  const detach = (target, what) => (ev) => busy(ev.target, async () => {
    try {
      await post(`/edge/sync-policies/${policy.id}/detach`, target);
      say(`sync policy ${policy.name} detached from ${what}`);
      window.dispatchEvent(new Event("console:reload"));
    } catch (e) { say(e.text || String(e), true); }
  });
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
      { label: "", value: (d) => {
        const dev = byId[d.device_id] || {};
        return d.attached_via === "device"
          ? h("button", { type: "button", class: "secondary", "aria-label": `detach from device ${d.name}`,
            onclick: detach({ device_id: d.device_id }, `device ${d.name}`) }, "Detach")
          : h("button", { type: "button", class: "secondary", "aria-label": `detach from fleet ${dev.fleet}`,
            onclick: detach({ fleet_id: dev.fleet_id }, `fleet ${dev.fleet}`) }, "Detach fleet");
      } },
    ], data, { empty: "not attached to any device or fleet with devices" }));
  return key;
}

function attachForms(policy, devices, fleets) {
  const live = devices.filter((d) => !d.revoked_at);
  const device = h("select", { id: "attach-device" },
    live.map((d) => h("option", { value: d.id }, d.name + (d.fleet ? ` (fleet ${d.fleet})` : ""))));
  const fleet = h("select", { id: "attach-fleet" }, fleets.map(([fid, fname]) => h("option", { value: fid }, fname)));
  const attach = (target, what) => async (ev) => busy(ev.target, async () => {
    try {
      await post(`/edge/sync-policies/${policy.id}/attach`, target());
      say(`sync policy ${policy.name} attached to ${what()}: sent to its agent(s)`);
      window.dispatchEvent(new Event("console:reload"));
    } catch (e) { say(e.text || String(e), true); }
  });
  const name = (sel) => sel.selectedOptions.length ? sel.selectedOptions[0].textContent : "";
  return h("section", { id: "attach", "aria-labelledby": "attach-title" },
    h("h2", { id: "attach-title" }, "Attach"),
    h("p", { class: "muted" }, "Attaching replaces the policy the device or fleet had."),
    live.length ? h("div", { class: "bar" }, h("label", {}, "Device", device),
      h("button", { type: "button", id: "attach-device-button",
        onclick: attach(() => ({ device_id: device.value }), () => `device ${name(device)}`) }, "Attach to device"))
      : h("p", { class: "muted" }, "No device to attach to."),
    fleets.length ? h("div", { class: "bar" }, h("label", {}, "Fleet", fleet),
      h("button", { type: "button", id: "attach-fleet-button",
        onclick: attach(() => ({ fleet_id: fleet.value }), () => `fleet ${name(fleet)}`) }, "Attach to fleet"))
      : h("p", { class: "muted" }, "No fleet yet (a device registered with a fleet name makes one)."));
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

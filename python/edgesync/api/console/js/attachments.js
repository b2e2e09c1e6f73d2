// A sync policy's attachments: the devices and fleets it is attached to (GET
// …/attachments: a fleet without devices too, which "Devices it governs" cannot show),
// Detach on each, and the forms attaching it to a device or to one of the project's fleets
// (GET /fleets). Attaching replaces what the device or fleet had.

import { post } from "./api.js";
import { busy, clear, h, link, say, table, when } from "./ui.js";

const reload = () => window.dispatchEvent(new Event("console:reload"));

const devicesIn = (fleet) => fleet ? `${fleet.device_count} device${fleet.device_count === 1 ? "" : "s"}` : "-";

// The section: the list (filled by showAttachments), then the forms.
export function attachmentsSection(listBox, policy, devices, fleets) {
  return h("section", { id: "attachments", "aria-labelledby": "attachments-title" },
    listBox, attachForms(policy, devices, fleets));
}

// Fills `box` with `attachments` (as the API lists them) unless they are `last`'s (then
// nothing moves and the focus stays where it is); answers the new `last`.
export function showAttachments(box, policy, attachments, fleets, last) {
  const key = JSON.stringify(attachments);
  if (key === last) return last;
  const fleetById = Object.fromEntries(fleets.map((f) => [f.id, f]));
  const detach = (a) => (ev) => busy(ev.target, async () => {
    const what = `${a.attached_to} ${a.name}`;
    try {
      await post(`/edge/sync-policies/${policy.id}/detach`,
        a.attached_to === "device" ? { device_id: a.device_id } : { fleet_id: a.fleet_id });
      say(`sync policy ${policy.name} detached from ${what}`);
      reload();
    } catch (e) { say(e.text || String(e), true); }
  });
  clear(box, h("h2", { id: "attachments-title" }, `Attached to (${attachments.length})`),
    table("Attachments", [
      { label: "kind", value: (a) => a.attached_to },
      { label: "name", value: (a) => a.attached_to === "device" ? link(`#/devices/${a.device_id}`, a.name) : a.name },
      { label: "devices", value: (a) => a.attached_to === "fleet" ? devicesIn(fleetById[a.fleet_id]) : "-" },
      { label: "attached", value: (a) => when(a.created_at) },
      { label: "action", value: (a) => h("button", { type: "button", class: "secondary",
        "aria-label": `detach from ${a.attached_to} ${a.name}`, onclick: detach(a) }, "Detach") },
    ], attachments, { empty: "not attached to any device or fleet" }));
  return key;
}

function attachForms(policy, devices, fleets) {
  const live = devices.filter((d) => !d.revoked_at);
  const device = h("select", { id: "attach-device" },
    live.map((d) => h("option", { value: d.id, "data-name": d.name }, d.name + (d.fleet ? ` (fleet ${d.fleet})` : ""))));
  const fleet = h("select", { id: "attach-fleet" },
    fleets.map((f) => h("option", { value: f.id, "data-name": f.name }, `${f.name} (${devicesIn(f)})`)));
  const name = (sel) => sel.selectedOptions.length ? sel.selectedOptions[0].dataset.name : "";
  const attach = (sel, kind) => (ev) => busy(ev.target, async () => {
    try {
      await post(`/edge/sync-policies/${policy.id}/attach`, { [`${kind}_id`]: sel.value });
      say(`sync policy ${policy.name} attached to ${kind} ${name(sel)}: sent to its agent(s)`);
      reload();
    } catch (e) { say(e.text || String(e), true); }
  });
  return h("div", { id: "attach", role: "group", "aria-labelledby": "attach-title" },
    h("h3", { id: "attach-title" }, "Attach"),
    h("p", { class: "muted" }, "Attaching replaces the policy the device or fleet had."),
    live.length ? h("div", { class: "bar" }, h("label", {}, "Device", device),
      h("button", { type: "button", id: "attach-device-button", onclick: attach(device, "device") }, "Attach to device"))
      : h("p", { class: "muted" }, "No device to attach to."),
    fleets.length ? h("div", { class: "bar" }, h("label", {}, "Fleet", fleet),
      h("button", { type: "button", id: "attach-fleet-button", onclick: attach(fleet, "fleet") }, "Attach to fleet"))
      : h("p", { class: "muted" }, "No fleet yet (a device registered with a fleet name makes one)."));
}

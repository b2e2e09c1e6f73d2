// Devices of the project: name, fleet, MQTT root topic, connection (when the API reports
// it), last batch, revoked; register one more (POST /devices), then its page
// (#/devices/{id}) issues credentials and the bundle, or revokes it.

import { ApiError, all, post } from "../api.js";
import { ago, busy, clear, h, link, num, pill, say, table, when } from "../ui.js";

export async function render(main) {
  const [devices, lineages] = await Promise.all([all("/devices"), all("/edge/lineages")]);
  const lastBatch = {};
  const count = {};
  for (const l of lineages) {
    count[l.device_id] = (count[l.device_id] || 0) + 1;
    if (l.last_batch_at && (!lastBatch[l.device_id] || l.last_batch_at > lastBatch[l.device_id])) lastBatch[l.device_id] = l.last_batch_at;
  }
  const hasSeen = devices.some((d) => "last_seen" in d || "last_seen_at" in d);
  const hasOnline = devices.some((d) => "connected" in d || "online" in d);
  const name = h("input", { id: "device-name", name: "name", required: true, "aria-describedby": "device-error" });
  const fleet = h("input", { id: "device-fleet", name: "fleet" });
  const error = h("p", { id: "device-error", class: "error-text", role: "alert" });
  const form = h("form", { class: "filters", id: "add-device" },
    h("label", {}, "Name", name), h("label", {}, "Fleet (optional)", fleet),
    h("button", { type: "submit" }, "Register device"), error);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    busy(form.querySelector("button"), async () => {
      error.textContent = "";
      name.removeAttribute("aria-invalid");
      try {
        const body = { name: name.value.trim() };
        if (fleet.value.trim()) body.fleet = fleet.value.trim();
        const { data } = await post("/devices", body);
        say(`device ${data.name} registered: root topic ${data.root_topic}`);
        location.hash = `#/devices/${data.id}`;
      } catch (e) {
        error.textContent = e instanceof ApiError ? e.text : String(e);
        if (e.field === "name") name.setAttribute("aria-invalid", "true");
      }
    });
  });
  clear(main, h("h1", {}, "Devices"),
    h("p", { class: "muted" }, `${num(devices.length)} device(s)`),
    table("Devices", [
      { label: "device", value: (d) => link(`#/devices/${d.id}`, d.name) },
      { label: "fleet", value: (d) => d.fleet || "-" },
      { label: "root topic", value: (d) => h("code", {}, d.root_topic) },
      hasOnline ? { label: "connected", value: (d) => pill(d.revoked_at ? "revoked"
        : (d.connected ?? d.online) ? "online" : "offline") } : null,
      hasSeen ? { label: "last seen", value: (d) => ago(d.last_seen ?? d.last_seen_at) } : null,
      { label: "last batch", value: (d) => ago(lastBatch[d.id]) },
      { label: "lineages", num: true, value: (d) => num(count[d.id] || 0) },
      { label: "registered", value: (d) => when(d.created_at) },
    ].filter(Boolean), devices),
    h("h2", {}, "Register a device"),
    h("p", { class: "muted" }, "Its page then issues the MQTT credentials and the device bundle (also ",
      h("code", {}, "edgesync devices credentials|bundle NAME"), ", docs/security.md)."),
    form);
}

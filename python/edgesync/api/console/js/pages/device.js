// One device: its state, sync policy and credentials; issue a password or a certificate,
// download its bundle (agent.yaml with the attached sync policy, agent.env, CA,
// certificate and key as one tar), revoke it (confirmed; ingest and the broker refuse it).
// Secrets are in the API's first answer only: shown or downloaded here once.

import { ApiError, get, post } from "../api.js";
import { save, tarOf } from "../download.js";
import { ago, busy, clear, confirmDialog, facts, h, link, num, pill, say, table, when, words } from "../ui.js";

export async function render(main, { args: [id] }) {
  const [{ data: d }, { data: p }] = await Promise.all([get(`/devices/${id}`), get(`/devices/${id}/sync-policy`)]);
  const issued = h("div", { id: "issued", "aria-live": "polite" });
  const credentials = h("div", { id: "credentials" });
  const refresh = () => showCredentials(credentials, id);
  await refresh(); // before the page is shown: it appears whole
  clear(main,
    h("p", {}, link("#/devices", "← Devices")),
    h("h1", {}, `Device ${d.name} `, pill(d.revoked_at ? "revoked" : d.connected ? "online" : "offline")),
    facts([["root topic", h("code", {}, d.root_topic)], ["fleet", d.fleet || "-"],
      ["registered", when(d.created_at)], d.revoked_at ? ["revoked", when(d.revoked_at)] : null,
      ["last seen", ago(d.last_seen_at)], ["last batch", ago(d.last_batch_at)],
      ["agent", d.agent_state ? `${words(d.agent_state)}${d.agent_version ? ` (${d.agent_version})` : ""}` : "-"],
      ["batches on the wire", traffic(d)],
      ["sync policy", p ? [link(`#/sync-policies/${p.policy_id}`, p.name), ` version ${p.version} (attached to its ${p.attached_via})`]
        : "none attached (its YAML's table_strategies)"]]),
    h("h2", {}, "Credentials"),
    credentials,
    d.revoked_at ? h("p", { class: "note", id: "revoked-note" },
      "This device is revoked: ingest refuses its messages, its credentials are revoked and the broker's "
      + "files no longer let it in. It gets no new credentials or bundle.") : [
      h("div", { class: "bar", role: "group", "aria-label": "Issue credentials" },
        h("button", { type: "button", class: "secondary", id: "issue-password",
          onclick: (ev) => issue(ev.target, d, "password", issued, refresh) }, "Issue password"),
        h("button", { type: "button", class: "secondary", id: "issue-certificate",
          onclick: (ev) => issue(ev.target, d, "certificate", issued, refresh) }, "Issue certificate (download)")),
      h("p", { class: "muted" }, "A new password revokes the previous one."),
      issued,
      h("h2", { id: "bundle-title" }, "Device bundle"),
      bundleForm(d, p, refresh),
      h("h2", {}, "Revoke"),
      h("div", { class: "bar" }, h("button", { type: "button", class: "danger", id: "revoke",
        onclick: (ev) => revoke(ev.target, d) }, "Revoke device…"))]);
}

async function showCredentials(box, id) {
  const { data } = await get(`/devices/${id}/credentials`);
  clear(box, table("Credentials", [
    { label: "kind", value: (c) => c.kind },
    { label: "serial", value: (c) => c.cert_serial || "-" },
    { label: "valid until", value: (c) => when(c.not_after) },
    { label: "issued", value: (c) => when(c.created_at) },
    { label: "revoked", value: (c) => c.revoked_at ? `${when(c.revoked_at)} (${c.revoke_reason || "-"})` : "-" },
  ], data, { empty: "none issued" }));
}

async function issue(button, d, kind, box, refresh) {
  await busy(button, async () => {
    try {
      const { data } = await post(`/devices/${d.id}/credentials`, { kind });
      if (kind === "password") {
        clear(box, h("div", { class: "note", id: "issued-password" },
          h("p", {}, "The password is shown once: copy it now."),
          facts([["username", h("code", {}, data.username)], ["password", h("code", {}, data.password)],
            ["broker", data.broker]])));
      } else {
        save(`${d.name}-certificate.tar`, tarOf([
          { name: "device.pem", mode: "0644", content: data.certificate_pem },
          { name: "device.key", mode: "0600", content: data.private_key_pem },
          { name: "device-ca.pem", mode: "0644", content: data.device_ca_pem }]));
        clear(box, h("p", { class: "note" }, `certificate ${data.serial} valid until ${when(data.not_after)} downloaded `
          + `as ${d.name}-certificate.tar (the key is in it only).`));
      }
      say(`${kind} issued for ${d.name}`);
      await refresh();
    } catch (e) { say(e.text || String(e), true); }
  });
}

function bundleForm(d, p, refresh) {
  const url = h("input", { id: "bundle-mqtt-url", name: "mqtt_url", placeholder: "ssl://broker.example.com:8883",
    "aria-describedby": "bundle-url-help" });
  const auth = h("select", { id: "bundle-auth", name: "auth" },
    h("option", { value: "cert" }, "client certificate (mTLS)"), h("option", { value: "password" }, "password"));
  const dir = h("input", { id: "bundle-install-dir", name: "install_dir", value: "/etc/edgesync" });
  const db = h("input", { id: "bundle-source-db", name: "source_db_path", value: "/var/lib/myapp/data.db" });
  const inputs = { mqtt_url: url, install_dir: dir, source_db_path: db, auth };
  const error = h("p", { id: "bundle-error", class: "error-text", role: "alert" });
  const form = h("form", { id: "bundle-form", "aria-labelledby": "bundle-title" },
    h("p", { class: "muted" }, p ? `agent.yaml carries sync policy ${p.name} version ${p.version} `
      + "with remote_policy: true (its later changes reach the running agent)."
      : "No sync policy is attached: agent.yaml lists no table_strategies (every table as rows)."),
    h("div", { class: "bar" },
      h("label", {}, "Broker URL as the device reaches it", url),
      h("label", {}, "Authentication", auth),
      h("label", {}, "Install directory on the device", dir),
      h("label", {}, "Application database on the device", db)),
    h("div", { class: "muted", id: "bundle-url-help" },
      "ssl:// or mqtts://; empty: the server's EDGESYNC_PUBLIC_MQTT_URL. Each download issues new credentials."),
    error,
    h("div", { class: "bar" }, h("button", { type: "submit", id: "bundle-download" }, "Download bundle")));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    busy(form.querySelector("#bundle-download"), async () => {
      error.textContent = "";
      for (const el of Object.values(inputs)) el.removeAttribute("aria-invalid");
      const body = { auth: auth.value, install_dir: dir.value.trim(), source_db_path: db.value.trim() };
      if (url.value.trim()) body.mqtt_url = url.value.trim();
      try {
        const { data } = await post(`/devices/${d.id}/bundle`, body);
        save(`${d.name}-bundle.tar`, tarOf(data.files));
        const sp = data.sync_policy;
        say(`bundle of ${d.name} downloaded (${data.files.map((f) => f.name).join(", ")})`
          + (sp ? `, with sync policy ${sp.name} version ${sp.version}` : ", no sync policy attached"));
        await refresh();
      } catch (e) {
        if (!(e instanceof ApiError)) throw e;
        error.textContent = e.text;
        const el = inputs[e.field];
        if (el) { el.setAttribute("aria-invalid", "true"); el.focus(); }
        say(e.text, true);
      }
    });
  });
  return form;
}

async function revoke(button, d) {
  const reason = await confirmDialog(`Revoke device ${d.name}?`,
    "Ingest refuses its messages from now on, its MQTT credentials and certificates are revoked and the "
    + "broker's files are written again without it (a connection still open lasts until it reconnects; "
    + "docs/security.md). It stays in the registry with its data; this cannot be undone.", "Revoke",
    { input: { label: "Reason", value: "revoked" } });
  if (reason === null) { say("revoke cancelled"); return; }
  await busy(button, async () => {
    try {
      const { data } = await post(`/devices/${d.id}/revoke`, { reason: reason.trim() || "revoked" });
      say(`device ${data.device} revoked: ${data.credentials_revoked} credential(s) revoked; broker: ${data.broker}`);
      window.dispatchEvent(new Event("console:reload"));
    } catch (e) { say(e.text || String(e), true); }
  });
}

// Bytes its batches cost as received, and beside their JSON when they came compressed.
export function traffic(d) {
  if (!d.batch_bytes_json) return "-";
  const ratio = d.compression_ratio;
  return `${num(d.batch_bytes_received)} bytes` + (ratio !== null && ratio < 1
    ? ` (compressed: ${Math.round(ratio * 1000) / 10} % of ${num(d.batch_bytes_json)} bytes of JSON)`
    : " (plain JSON)");
}

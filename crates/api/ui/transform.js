// transform.js: the portal's Transformation tab: write an endpoint's handler,
// try it on an event type's example or a past message, then save and enable it.
// Trying runs the code on the server, in the same sandbox as deliveries.
import { h, show, seg, qs, pretty, errorBox, field, act } from "./dom.js";

const TEMPLATE = `/**
 * @param webhook the webhook: { eventType, method, url, payload, cancel, variables }
 * Change payload, method ("POST" or "PUT") or url, or set cancel = true to skip it.
 */
function handler(webhook) {
  return webhook;
}
`;

/** Fills `body` with the editor for endpoint `ep`; `ctx` has `api`, `base`,
 * `catalog`, `example` and `readOnly` (then the code is shown, and nothing more). */
export async function transformation(ep, body, ctx) {
  const { api, base, catalog, example, readOnly } = ctx;
  const epBase = `${base}/endpoint/${seg(ep.id)}`;
  const current = await api("GET", `${epBase}/transformation`);
  if (readOnly) {
    show(body, h("h2", {}, "Transformation"),
      h("p", { class: "muted" }, current.enabled ? "Enabled: this code reshapes every delivery to this endpoint." : "Not enabled."),
      current.code ? h("pre", {}, current.code) : h("p", { class: "muted" }, "No code."));
    return;
  }
  const [codeF, code] = field("Code", { tag: "textarea", rows: 14, spellcheck: "false", class: "code", value: current.code || TEMPLATE },
    "JavaScript defining handler(webhook). It runs before each delivery to this endpoint, with at most 100 ms and 16 MiB.");
  code.value = current.code || TEMPLATE;
  const enabled = h("input", { type: "checkbox", id: "tr-enabled", checked: !!current.enabled, disabled: !current.available });
  // What to try it on: an event type's example, or one of the last messages.
  const recent = await api("GET", `${base}/msg${qs({ limit: 10, with_content: "true" })}`);
  const samples = [];
  for (const et of catalog) {
    const ex = example(et);
    if (ex) samples.push({ label: `Example of ${et.name}`, eventType: et.name, payload: ex });
  }
  for (const m of recent.data) {
    if (m.payload !== undefined && m.payload !== null) samples.push({ label: `Message ${m.id} (${m.eventType})`, eventType: m.eventType, payload: m.payload });
  }
  if (!samples.length) samples.push({ label: "A ping ({\"success\": true})", eventType: "svix.ping", payload: { success: true } });
  const sample = h("select", { id: "tr-sample" }, samples.map((s, i) => h("option", { value: String(i) }, s.label)));
  const tryOut = h("div", { "aria-live": "polite", id: "tr-output" });
  // Trying runs code on the server, which the operator has not allowed yet.
  const tryBtn = h("button", { type: "button", disabled: !current.available }, "Try it");
  tryBtn.addEventListener("click", () => act(tryBtn, tryOut, async () => {
    const s = samples[Number(sample.value)];
    const r = await api("POST", `${epBase}/transformation/try`, { code: code.value, eventType: s.eventType, payload: s.payload });
    if (r.error) show(tryOut, h("p", { class: "error", role: "alert" }, r.error));
    else if (r.cancel) show(tryOut, h("p", { class: "notice", role: "status" }, "Canceled: this message would not be sent."));
    else show(tryOut, h("p", { class: "notice", role: "status" }, `Would send: ${r.method} ${r.url}`), h("pre", {}, pretty(r.payload)));
  }));
  const out = h("div", { "aria-live": "polite" });
  const save = h("button", { class: "primary", type: "submit" }, "Save");
  const form = h("form", { class: "stack" },
    current.available ? null : h("p", { class: "warning", role: "note" },
      "Transformations are not switched on for this service yet, so code cannot be tried or enabled here. You can write and save it; ask the service that sent you this link to switch them on."),
    codeF,
    h("div", {}, h("label", { for: "tr-sample" }, "Try it on"), sample),
    h("div", { class: "actions" }, tryBtn), tryOut,
    h("label", { class: "check", for: "tr-enabled" }, enabled, "Enabled (applied to every delivery to this endpoint)"),
    h("div", { class: "actions" }, save), out);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    act(save, out, () => api("PATCH", `${epBase}/transformation`, { code: code.value, enabled: enabled.checked }),
      enabled.checked ? "Saved and enabled." : "Saved.");
  });
  show(body, h("h2", {}, "Transformation"),
    h("p", { class: "muted" }, "Reshape what this endpoint receives: the payload, the URL or the method, or skip a message."),
    form);
}

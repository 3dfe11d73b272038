// portal.js: the customer portal. It opens with an app-portal token in the URL
// fragment (never sent to a server), keeps it for this tab, and calls the
// application's own /api/v1 routes with it; the server confines the token to
// that application whatever this page asks.
import { h, show, client, seg, qs, time, status, pretty, errorBox, loading, empty, field, table, act, session, ApiError, limiter, daysAgo } from "./dom.js";
import { deliveryChart } from "./chart.js";
import { transformation } from "./transform.js";

const main = document.getElementById("main");
const parts = location.pathname.split("/").filter(Boolean); // ["portal", tenant, app]
const dec = (v) => { try { return decodeURIComponent(v || ""); } catch (_) { return ""; } };
const appId = dec(parts[2]);
const storeKey = `hookgate.portal:${appId}`;

const branding = (() => {
  try { return JSON.parse(document.querySelector('meta[name="hookgate-branding"]').content || "{}"); } catch (_) { return {}; }
})();
const owner = branding.displayName || "the service that sent you this link";

function applyBranding() {
  const root = document.documentElement;
  root.dataset.theme = branding.theme || "auto";
  if (/^#[0-9a-f]{6}$/i.test(branding.primaryColor || "")) {
    root.style.setProperty("--primary", branding.primaryColor);
    const n = parseInt(branding.primaryColor.slice(1), 16);
    const lum = (0.299 * (n >> 16) + 0.587 * ((n >> 8) & 255) + 0.114 * (n & 255)) / 255;
    root.style.setProperty("--on-primary", lum > 0.6 ? "#111111" : "#ffffff");
  }
  const name = branding.displayName ? `${branding.displayName} webhooks` : "Webhooks";
  document.getElementById("brand").textContent = name;
  document.title = name;
  const logo = document.getElementById("logo");
  if (branding.logoUrl && /^https?:\/\//.test(branding.logoUrl)) {
    logo.src = branding.logoUrl;
    logo.alt = branding.displayName || "";
    logo.hidden = false;
  }
}

// The tenant a token was issued by: the first line of its claims (`hgp_<hex>_<mac>`).
// The page's branding comes from the tenant in its path; a token of another
// tenant under it would dress one tenant's portal in another's name.
function tokenTenant(t) {
  const m = /^hgp_([0-9a-f]+)_/.exec(t || "");
  if (!m || m[1].length % 2) return null;
  let text = "";
  for (let i = 0; i < m[1].length; i += 2) text += String.fromCharCode(parseInt(m[1].slice(i, i + 2), 16));
  return text.split("\n")[0];
}

function token() {
  const m = /[#&]key=([^&]+)/.exec(location.hash);
  if (m) {
    let raw = null;
    try { raw = decodeURIComponent(m[1]); } catch (_) { /* a mangled link: treated as no key */ }
    if (raw) session.set(storeKey, raw);
    // Out of the address bar and the history: a copied URL does not carry it.
    history.replaceState(null, "", location.pathname + location.search);
  }
  return session.get(storeKey);
}

applyBranding();
const held = token();
const key = held && tokenTenant(held) === dec(parts[1]) ? held : null;
const api = key ? client(key) : null;
const base = `/api/v1/app/${seg(appId)}`;
let catalog = [];

function expired(e) {
  if (e instanceof ApiError && e.status === 401) {
    session.drop(storeKey);
    show(main, h("h1", {}, "This link has expired"),
      h("p", {}, `Portal links are valid for a limited time. Ask ${owner} for a new one.`));
    return true;
  }
  return false;
}

async function guarded(fn) {
  try { await fn(); } catch (e) { if (!expired(e)) show(main, errorBox(e)); }
}

function focusMain() { main.focus(); }

// --- the endpoint list ------------------------------------------------------------------------

async function listView() {
  show(main, h("h1", {}, "Endpoints"), loading("endpoints"));
  const list = await api("GET", `${base}/endpoint?limit=250`);
  const add = h("button", { class: "primary", onclick: () => guarded(() => formView(null)) }, "Add endpoint");
  const rows = list.data.map((ep) => [
    h("button", { class: "link", onclick: () => guarded(() => endpointView(ep.id, "overview")) }, ep.url),
    ep.description || h("span", { class: "muted" }, "—"),
    ep.disabled ? h("span", { class: "pill idle" }, "Disabled") : h("span", { class: "pill ok" }, "Enabled"),
    ep.eventTypes && ep.eventTypes.length ? ep.eventTypes.join(", ") : h("span", { class: "muted" }, "All events"),
  ]);
  const dests = await destinationsList();
  show(main, h("h1", {}, "Endpoints"),
    h("p", { class: "muted" }, "Endpoints are the URLs we send your webhooks to."),
    h("div", { class: "actions" }, add),
    rows.length ? table("Your endpoints", ["URL", "Description", "Status", "Events"], rows)
      : empty("No endpoints yet. Add one to start receiving webhooks."),
    dests);
  focusMain();
}

// --- destinations (queues, tables, FIFO and polling endpoints: set up by the tenant) ---------

function destinationWhere(d) {
  const c = d.config || {};
  const where = c.uri || c.url || c.queueUrl || c.topicArn || c.eventBusName || (c.bucket && `s3://${c.bucket}`);
  return where || (d.type === "pollingEndpoint" ? "you read it through the poller API" : "—");
}

// The application's destinations beyond HTTP, read only, each with its recent attempts.
async function destinationsList() {
  const list = await api("GET", `${base}/destination?limit=250`);
  if (!list.data.length) return [];
  const items = list.data.map((d) => {
    const pill = d.status === "disabled" ? h("span", { class: "pill idle" }, "Disabled")
      : d.status === "retrying" ? h("span", { class: "pill bad" }, "Retrying") : h("span", { class: "pill ok" }, "Enabled");
    const inner = h("div", {});
    const box = h("details", { class: "destination" },
      h("summary", {}, h("strong", {}, d.type), " ", destinationWhere(d), " ", pill), inner);
    box.addEventListener("toggle", () => {
      if (!box.open || inner.dataset.loaded) return;
      inner.dataset.loaded = "1";
      guarded(async () => {
        show(inner, loading("attempts"));
        const attempts = await api("GET", `${base}/attempt/endpoint/${seg(d.id)}${qs({ limit: 20 })}`);
        show(inner,
          d.failureReason ? h("p", {}, h("strong", {}, "Failing: "), d.failureReason) : null,
          attempts.data.length ? table(`Recent attempts to ${d.type}`, ["When", "Status", "Answer"],
            attempts.data.map((a) => [time(a.timestamp), status(a.status === 0 ? "success" : "fail"), a.response]))
            : empty("No attempts yet."));
      });
    });
    return box;
  });
  return [h("h2", {}, "Destinations"),
    h("p", { class: "muted" }, `Other places ${owner} delivers your events to. They are set up through the API.`),
    items];
}

// --- add and edit -----------------------------------------------------------------------------

function example(et) {
  const versions = et.schemas && typeof et.schemas === "object" ? Object.values(et.schemas) : [];
  for (const v of versions.reverse()) {
    const ex = (v && Array.isArray(v.examples) && v.examples[0]) || (v && v.example);
    if (ex) return ex;
  }
  return null;
}

function eventPicker(selected) {
  const boxes = [];
  const items = catalog.map((et, i) => {
    // By position: names such as `order.created` and `order_created` would share
    // an id made from the name, and a label would tick the other's box.
    const id = `et-${i}`;
    const box = h("input", { type: "checkbox", id, value: et.name, checked: selected.includes(et.name) });
    boxes.push(box);
    const ex = example(et);
    return h("div", {},
      h("label", { class: "check", for: id }, box, h("span", {}, h("code", {}, et.name), et.description ? ` — ${et.description}` : "")),
      ex ? h("details", {}, h("summary", {}, `Example payload of ${et.name}`), h("pre", {}, pretty(ex))) : null);
  });
  const set = h("fieldset", {}, h("legend", {}, "Event types"),
    h("p", { class: "hint" }, "Leave all unticked to receive every event type."),
    items.length ? items : h("p", { class: "muted" }, "No event types are published yet: the endpoint receives every event."));
  return [set, () => boxes.filter((b) => b.checked).map((b) => b.value)];
}

async function formView(ep) {
  const editing = !!ep;
  const [urlF, url] = field("Endpoint URL", { type: "url", required: true, value: ep ? ep.url : "", placeholder: "https://example.com/webhooks" }, "Where we POST each event.");
  const [descF, desc] = field("Description", { type: "text", value: ep ? ep.description : "" });
  const [rateF, rate] = field("Rate limit (messages per second)", { type: "number", min: 1, value: ep && ep.throttleRate ? ep.throttleRate : "" }, "Optional. Empty means no limit.");
  const [picker, picked] = eventPicker(ep && ep.eventTypes ? ep.eventTypes : []);
  const disabled = h("input", { type: "checkbox", id: "ep-disabled", checked: ep ? ep.disabled : false });
  const out = h("div", { "aria-live": "polite" });
  const save = h("button", { class: "primary", type: "submit" }, editing ? "Save changes" : "Create endpoint");
  const form = h("form", { class: "stack", novalidate: true }, urlF, descF, picker, rateF,
    editing ? h("label", { class: "check", for: "ep-disabled" }, disabled, "Disabled (nothing is sent while disabled)") : null,
    h("div", { class: "actions" }, save,
      h("button", { type: "button", onclick: () => guarded(() => (editing ? endpointView(ep.id, "settings") : listView())) }, "Cancel")),
    out);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    if (!url.value.trim()) { show(out, h("p", { class: "error", role: "alert" }, "Enter the URL to send webhooks to.")); url.focus(); return; }
    const types = picked();
    const body = {
      url: url.value.trim(),
      description: desc.value,
      eventTypes: types.length ? types : null,
      throttleRate: rate.value ? Number(rate.value) : null,
    };
    if (editing) body.disabled = disabled.checked;
    act(save, out, async () => {
      const saved = editing ? await api("PATCH", `${base}/endpoint/${seg(ep.id)}`, body) : await api("POST", `${base}/endpoint`, body);
      await endpointView(saved.id, editing ? "settings" : "overview", editing ? "Saved." : "Endpoint created.");
    });
  });
  if (!editing) show(main, h("button", { class: "link", onclick: () => guarded(listView) }, "← All endpoints"), h("h1", {}, "Add an endpoint"), form);
  return form;
}

// --- one endpoint -----------------------------------------------------------------------------

const TABS = [["overview", "Overview"], ["messages", "Messages"], ["testing", "Testing"], ["transformation", "Transformation"], ["settings", "Settings"]];

async function endpointView(id, tab, notice) {
  const ep = await api("GET", `${base}/endpoint/${seg(id)}`);
  const body = h("div", { id: "tab-body", role: "tabpanel" });
  const tabs = h("div", { class: "tabs", role: "tablist", "aria-label": "Endpoint sections" },
    TABS.map(([k, label]) => h("button", { role: "tab", "aria-selected": String(k === tab), id: `tab-${k}`, "aria-controls": "tab-body",
      onclick: () => guarded(() => endpointView(id, k)) }, label)));
  show(main, h("button", { class: "link", onclick: () => guarded(listView) }, "← All endpoints"),
    h("h1", {}, ep.url),
    h("p", {}, ep.disabled ? h("span", { class: "pill idle" }, "Disabled") : h("span", { class: "pill ok" }, "Enabled"), " ", ep.description || ""),
    notice ? h("p", { class: "notice", role: "status" }, notice) : null,
    tabs, body);
  body.setAttribute("aria-labelledby", `tab-${tab}`);
  const views = { overview, messages, testing, settings, transformation: (e, b) => transformation(e, b, { api, base, catalog, example }) };
  await views[tab](ep, body);
}

async function overview(ep, body) {
  const epBase = `${base}/endpoint/${seg(ep.id)}`;
  const chartBox = h("div", {}, loading("the delivery chart"));
  const range = (days) => guarded(async () => {
    const until = new Date();
    const since = new Date(until.getTime() - days * 86400e3);
    const stats = await api("GET", `${epBase}/stats/hourly${qs({ since: since.toISOString(), until: until.toISOString() })}`);
    show(chartBox, deliveryChart(stats.data, stats.since, stats.until));
  });
  const b24 = h("button", { onclick: () => { b24.setAttribute("aria-pressed", "true"); b7.setAttribute("aria-pressed", "false"); range(1); }, "aria-pressed": "true" }, "Last 24 hours");
  const b7 = h("button", { onclick: () => { b7.setAttribute("aria-pressed", "true"); b24.setAttribute("aria-pressed", "false"); range(7); }, "aria-pressed": "false" }, "Last 7 days");
  const counts = await api("GET", `${epBase}/stats${qs({ since: daysAgo(7) })}`);
  const card = (n, label) => h("div", { class: "card" }, h("div", { class: "n" }, String(n)), h("div", { class: "muted" }, label));
  const [sinceF, since] = field("Recover failed messages since", { type: "datetime-local", required: true }, "Every message that failed since then is sent again.");
  const out = h("div", { "aria-live": "polite" });
  const recover = h("button", { type: "submit" }, "Recover failed messages");
  const form = h("form", { class: "stack" }, sinceF, h("div", { class: "actions" }, recover), out);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    if (!since.value) { show(out, h("p", { class: "error", role: "alert" }, "Pick the date and time to recover from.")); return; }
    act(recover, out, () => api("POST", `${epBase}/recover`, { since: new Date(since.value).toISOString() }), "Recovery started: failed messages since then are being sent again.");
  });
  show(body,
    h("h2", {}, "Messages in the last 7 days"),
    h("div", { class: "grid" }, card(counts.success, "Delivered"), card(counts.fail, "Failed"), card(counts.pending + counts.sending, "Waiting")),
    h("h2", {}, "Attempts per hour"),
    h("div", { class: "actions", role: "group", "aria-label": "Chart range" }, b24, b7),
    chartBox,
    h("h2", {}, "Recover"), form);
  range(1);
}

const STATUS = [["", "Any status"], ["0", "Delivered"], ["2", "Failed"], ["1", "Pending"], ["3", "Sending"], ["4", "Canceled"]];

async function messages(ep, body) {
  const epBase = `${base}/endpoint/${seg(ep.id)}`;
  const statusSel = h("select", { id: "f-status" }, STATUS.map(([v, t]) => h("option", { value: v }, t)));
  const typeSel = h("select", { id: "f-type" }, h("option", { value: "" }, "Any event type"), catalog.map((et) => h("option", { value: et.name }, et.name)));
  const sinceIn = h("input", { type: "datetime-local", id: "f-since" });
  const list = h("div", { "aria-live": "polite" });
  const filters = h("form", { class: "actions", role: "search", "aria-label": "Filter messages" },
    h("div", {}, h("label", { for: "f-status" }, "Status"), statusSel),
    h("div", {}, h("label", { for: "f-type" }, "Event type"), typeSel),
    h("div", {}, h("label", { for: "f-since" }, "Since"), sinceIn),
    h("div", {}, h("span", { class: "sr-only" }, "Apply"), h("button", { type: "submit" }, "Filter")));
  const load = () => guarded(async () => {
    show(list, loading("messages"));
    const page = await api("GET", `${epBase}/msg${qs({
      limit: 50, status: statusSel.value, event_types: typeSel.value,
      after: sinceIn.value ? new Date(sinceIn.value).toISOString() : "", with_content: "true",
    })}`);
    if (!page.data.length) { show(list, empty("No messages match. Messages appear here once they are sent to this endpoint.")); return; }
    show(list, page.data.map((m) => messageRow(ep, m)));
  });
  filters.addEventListener("submit", (ev) => { ev.preventDefault(); load(); });
  show(body, filters, list);
  load();
}

function messageRow(ep, m) {
  const attemptsBox = h("div", {});
  const out = h("div", { "aria-live": "polite" });
  const resend = h("button", {}, "Resend");
  resend.addEventListener("click", () => act(resend, out,
    () => api("POST", `${base}/msg/${seg(m.id)}/endpoint/${seg(ep.id)}/resend`), "Resend scheduled: it goes out in a moment."));
  const details = h("details", { class: "message" },
    h("summary", {}, status(m.statusText), " ", h("code", {}, m.eventType), " · ", time(m.timestamp), " · ", h("span", { class: "muted wrap" }, m.id)),
    h("div", { class: "actions" }, resend), out,
    h("h3", {}, "Payload"), h("pre", {}, pretty(m.payload)),
    h("h3", {}, "Attempts"), attemptsBox);
  details.addEventListener("toggle", () => {
    if (!details.open || attemptsBox.dataset.loaded) return;
    attemptsBox.dataset.loaded = "1";
    guarded(async () => {
      show(attemptsBox, loading("attempts"));
      const page = await api("GET", `${base}/attempt/msg/${seg(m.id)}${qs({ endpoint_id: ep.id, limit: 50 })}`);
      show(attemptsBox, page.data.length ? page.data.map(attemptBox) : empty("No attempt yet: it is on its way."));
    });
  });
  return details;
}

function attemptBox(a) {
  const headers = a.requestHeaders ? Object.entries(a.requestHeaders) : [];
  return h("div", { class: "chain attempt" },
    h("p", {}, status(a.statusText), " ", h("strong", {}, a.responseStatusCode ? `HTTP ${a.responseStatusCode}` : "No response"),
      ` · ${a.responseDurationMs} ms · `, time(a.timestamp), a.triggerType === 1 ? " · manual" : ""),
    h("p", { class: "muted wrap" }, `To ${a.url}`),
    h("h3", {}, "Response body"), h("pre", { class: "response" }, a.response ? pretty(a.response) : "(empty)"),
    headers.length ? [h("h3", {}, "Request headers"), table("Request headers", ["Header", "Value"], headers.map(([k, v]) => [h("code", {}, k), v]))] : null);
}

async function testing(ep, body) {
  const sel = h("select", { id: "t-type" }, h("option", { value: "svix.ping" }, "svix.ping (a ping)"), catalog.map((et) => h("option", { value: et.name }, et.name)));
  const out = h("div", { "aria-live": "polite" });
  const send = h("button", { class: "primary", type: "submit" }, "Send test event");
  const form = h("form", { class: "stack" },
    h("div", {}, h("label", { for: "t-type" }, "Event type"), h("p", { class: "hint" }, "We send the event type's example payload to this endpoint only."), sel),
    h("div", { class: "actions" }, send), out);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    act(send, out, async () => {
      const m = await api("POST", `${base}/endpoint/${seg(ep.id)}/send-example`, { eventType: sel.value });
      show(out, h("p", { class: "notice", role: "status" }, `Test event sent (${m.id}). Its delivery shows under Messages.`));
    });
  });
  show(body, form);
}

async function settings(ep, body) {
  const epBase = `${base}/endpoint/${seg(ep.id)}`;
  const form = await formView(ep);
  // The signing secret: shown only on request, rotated with a second click.
  const secretOut = h("div", { "aria-live": "polite" });
  const reveal = h("button", {}, "Reveal secret");
  reveal.addEventListener("click", () => act(reveal, secretOut, async () => {
    const s = await api("GET", `${epBase}/secret`);
    show(secretOut, h("p", {}, h("span", { class: "secret", id: "secret-value" }, s.key)));
  }));
  const rotate = h("button", {}, "Rotate secret…");
  const confirmBox = h("div", { class: "actions" });
  rotate.addEventListener("click", () => {
    const yes = h("button", { class: "danger" }, "Yes, rotate it");
    const no = h("button", { onclick: () => show(confirmBox) }, "Keep the current secret");
    yes.addEventListener("click", () => act(yes, secretOut, async () => {
      await api("POST", `${epBase}/secret/rotate`, {});
      show(confirmBox);
      show(secretOut, h("p", { class: "notice", role: "status" }, "Rotated. The previous secret keeps working for 24 hours."));
    }));
    show(confirmBox, h("span", {}, "Messages will be signed with a new secret."), yes, no);
    yes.focus();
  });
  // Custom headers.
  const hdr = await api("GET", `${epBase}/headers`);
  const rows = h("div", {});
  const addRow = (k = "", v = "") => {
    const n = rows.children.length;
    const name = h("input", { type: "text", id: `h-name-${n}`, value: k, "aria-label": "Header name" });
    const value = h("input", { type: "text", id: `h-value-${n}`, value: v, "aria-label": `Value of header ${k || n + 1}` });
    const row = h("div", { class: "actions header-row" }, name, value, h("button", { type: "button", onclick: () => row.remove() }, "Remove"));
    rows.append(row);
  };
  Object.entries(hdr.headers || {}).forEach(([k, v]) => addRow(k, v));
  const hOut = h("div", { "aria-live": "polite" });
  const saveH = h("button", { type: "submit" }, "Save headers");
  const hForm = h("form", { class: "stack" }, rows,
    (hdr.sensitive || []).length ? h("p", { class: "hint" }, `Also set (hidden): ${hdr.sensitive.join(", ")}`) : null,
    h("div", { class: "actions" }, h("button", { type: "button", onclick: () => addRow() }, "Add header"), saveH), hOut);
  hForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const headers = {};
    for (const r of rows.querySelectorAll(".header-row")) {
      const [n, v] = r.querySelectorAll("input");
      if (n.value.trim()) headers[n.value.trim()] = v.value;
    }
    act(saveH, hOut, () => api("PATCH", `${epBase}/headers`, { headers, deleteHeaders: Object.keys(hdr.headers || {}).filter((k) => !(k in headers)) }), "Headers saved.");
  });
  // Delete, with a second click.
  const dOut = h("div", { "aria-live": "polite" });
  const del = h("button", { class: "danger" }, "Delete endpoint…");
  del.addEventListener("click", () => {
    const yes = h("button", { class: "danger" }, "Yes, delete it");
    yes.addEventListener("click", () => act(yes, dOut, async () => { await api("DELETE", epBase); await listView(); }));
    show(dOut, h("span", {}, "It stops receiving webhooks at once. "), yes, h("button", { onclick: () => show(dOut) }, "Cancel"));
    yes.focus();
  });
  show(body, h("h2", {}, "Endpoint"), form,
    h("h2", {}, "Signing secret"), h("p", { class: "muted" }, "Use it to verify that webhooks come from us."),
    h("div", { class: "actions" }, reveal, rotate), confirmBox, secretOut,
    h("h2", {}, "Custom headers"), h("p", { class: "muted" }, "Sent with every webhook to this endpoint."), hForm,
    h("h2", {}, "Danger zone"), h("div", { class: "actions" }, del), dOut);
}

// --- start ------------------------------------------------------------------------------------

async function start() {
  if (!api) {
    show(main, h("h1", {}, "This link is incomplete"), h("p", {}, `It is missing its access key. Ask ${owner} for a new portal link.`));
    return;
  }
  await guarded(async () => {
    const types = await api("GET", "/api/v1/event-type?limit=250");
    catalog = types.data.filter((t) => !t.archived);
    await listView();
  });
}

start();

// console.js: the agency's console. With the admin token it shows the operator's
// view (tenants, their keys, their last day); with a tenant's API key, the
// tenant's (applications, sources, inbound events, search, portal branding).
// Either credential is kept for this tab and sent only as an Authorization header.
import { h, show, client, seg, qs, time, status, pretty, errorBox, loading, empty, field, table, act, session, ApiError, limiter, daysAgo } from "./dom.js";

const main = document.getElementById("main");
const who = document.getElementById("who");
const KEY = "hookgate.console";
let api = null;

function signOut() {
  session.drop(KEY);
  api = null;
  show(who);
  login();
}

async function guarded(fn, into = main) {
  try { await fn(); } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      session.drop(KEY);
      show(who);
      login("That credential is not valid any more. Sign in again.");
      return;
    }
    show(into, errorBox(e));
  }
}

// --- signing in -------------------------------------------------------------------------------

function login(message) {
  const [f, input] = field("Admin token or tenant API key", { type: "password", autocomplete: "current-password", required: true },
    "The operator signs in with HOOKGATE_ADMIN_TOKEN; a tenant with one of its API keys (hgk_…).");
  const out = h("div", { "aria-live": "polite" }, message ? h("p", { class: "error", role: "alert" }, message) : null);
  const go = h("button", { class: "primary", type: "submit" }, "Sign in");
  const form = h("form", { class: "stack" }, f, h("div", { class: "actions" }, go), out);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const token = input.value.trim();
    if (!token) { show(out, h("p", { class: "error", role: "alert" }, "Enter a token or an API key.")); return; }
    act(go, out, async () => {
      const call = client(token);
      await call("GET", token.startsWith("hgk_") ? "/api/v1/app?limit=1" : "/admin/v1/tenant?limit=1");
      session.set(KEY, token);
      start();
    });
  });
  show(main, h("h1", {}, "Sign in"), form);
  input.focus();
}

function header(role) {
  show(who, h("span", {}, role), h("button", { onclick: signOut }, "Sign out"));
}

// --- the operator -----------------------------------------------------------------------------

const pct = (x) => `${(x * 100).toFixed(1)} %`;
const MOST_TENANTS = 1000;

async function tenantsView(notice) {
  show(main, h("h1", {}, "Tenants"), loading("tenants"));
  const [nameF, name] = field("New tenant's name", { type: "text", required: true });
  const out = h("div", { "aria-live": "polite" }, notice || null);
  const create = h("button", { class: "primary", type: "submit" }, "Create tenant");
  const form = h("form", { class: "stack" }, nameF, h("div", { class: "actions" }, create), out);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    if (!name.value.trim()) { show(out, h("p", { class: "error", role: "alert" }, "Give the tenant a name.")); return; }
    act(create, out, async () => {
      const t = await api("POST", "/admin/v1/tenant", { name: name.value.trim() });
      await tenantsView(h("div", { class: "notice", role: "status" },
        h("p", {}, `Created ${t.name}. Its API key is shown once: copy it now.`),
        h("p", {}, h("span", { class: "secret", id: "new-api-key" }, t.apiKey))));
    });
  });
  // Every page, up to MOST_TENANTS: a new tenant sorts last, and an operator who
  // just made one must see it (the first page alone hid it past 100 tenants).
  const tenants = [];
  let iterator = "";
  let more = false;
  while (true) {
    const page = await api("GET", `/admin/v1/tenant${qs({ limit: 100, iterator })}`);
    tenants.push(...page.data);
    if (page.done || !page.iterator) break;
    if (tenants.length >= MOST_TENANTS) { more = true; break; }
    iterator = page.iterator;
  }
  const few = limiter(4);
  const rows = tenants.map((t) => {
    const cells = Array.from({ length: 6 }, () => h("td", {}, h("span", { class: "muted" }, "…")));
    guarded(async () => {
      const s = await few(() => api("GET", `/admin/v1/tenant/${seg(t.id)}/stats`));
      [s.messages, s.inboundEvents, s.duplicates, pct(s.failureRate), s.pendingDeliveries].forEach((v, i) => show(cells[i], String(v)));
      show(cells[5], s.oldestPending ? time(s.oldestPending) : "—");
    }, cells[0]);
    const toggle = h("button", {}, t.disabled ? "Enable" : "Disable");
    toggle.addEventListener("click", () => act(toggle, out, async () => {
      await api("PATCH", `/admin/v1/tenant/${seg(t.id)}`, { disabled: !t.disabled });
      await tenantsView(h("p", { class: "notice", role: "status" }, `${t.name} is ${t.disabled ? "enabled" : "disabled"}.`));
    }));
    return [
      h("button", { class: "link", onclick: () => guarded(() => tenantView(t.id)) }, t.name),
      t.disabled ? h("span", { class: "pill bad" }, "Disabled") : h("span", { class: "pill ok" }, "Active"),
      ...cells, toggle,
    ];
  });
  show(main, h("h1", {}, "Tenants"), form,
    h("h2", {}, "The last 24 hours"),
    more ? h("p", { class: "notice" }, `The first ${MOST_TENANTS} tenants are shown.`) : null,
    rows.length ? table("Tenants", ["Tenant", "Status", "Messages", "Inbound", "Duplicates caught", "Failure rate", "Pending", "Oldest pending", ""], rows)
      : empty("No tenants yet. Create the first one above."));
}

async function tenantView(id, notice) {
  const t = await api("GET", `/admin/v1/tenant/${seg(id)}`);
  const keys = await api("GET", `/admin/v1/tenant/${seg(id)}/api-key`);
  const out = h("div", { "aria-live": "polite" }, notice || null);
  const issue = h("button", { class: "primary" }, "Issue a new key");
  issue.addEventListener("click", () => act(issue, out, async () => {
    const k = await api("POST", `/admin/v1/tenant/${seg(id)}/api-key`);
    await tenantView(id, h("div", { class: "notice", role: "status" }, h("p", {}, "New key, shown once: copy it now."), h("p", {}, h("span", { class: "secret" }, k.apiKey))));
  }));
  const rows = keys.data.map((k) => {
    const revoke = h("button", { class: "danger" }, "Revoke");
    revoke.addEventListener("click", () => act(revoke, out, async () => {
      await api("DELETE", `/admin/v1/tenant/${seg(id)}/api-key/${seg(k.id)}`);
      await tenantView(id, h("p", { class: "notice", role: "status" }, `Key ${k.id} revoked.`));
    }));
    return [h("code", {}, k.id), time(k.createdAt), k.revokedAt ? h("span", {}, "Revoked ", time(k.revokedAt)) : revoke];
  });
  show(main, h("button", { class: "link", onclick: () => guarded(() => tenantsView()) }, "← All tenants"),
    h("h1", {}, t.name),
    h("p", { class: "muted" }, h("code", {}, t.id), t.uid ? ` · uid ${t.uid}` : "", " · created ", time(t.createdAt)),
    h("p", {}, t.disabled ? h("span", { class: "pill bad" }, "Disabled") : h("span", { class: "pill ok" }, "Active"),
      ` · messages kept ${t.retention.effective.messageDays} days, inbound events ${t.retention.effective.inboundDays} days`),
    h("h2", {}, "API keys"), h("div", { class: "actions" }, issue), out,
    rows.length ? table("API keys", ["Key", "Issued", ""], rows) : empty("No keys."));
}

// --- the tenant -------------------------------------------------------------------------------

const TABS = [["apps", "Applications"], ["sources", "Sources"], ["search", "Search"], ["portal", "Portal branding"]];

function tenantShell(tab, fill) {
  const body = h("div", { role: "tabpanel", id: "tab-body", "aria-labelledby": `tab-${tab}` });
  const tabs = h("div", { class: "tabs", role: "tablist", "aria-label": "Console sections" },
    TABS.map(([k, label]) => h("button", { role: "tab", id: `tab-${k}`, "aria-selected": String(k === tab), "aria-controls": "tab-body",
      onclick: () => guarded(() => VIEWS[k]()) }, label)));
  show(main, tabs, body);
  return guarded(() => fill(body), body);
}

const VIEWS = {
  apps: () => tenantShell("apps", appsView),
  sources: () => tenantShell("sources", sourcesView),
  search: (q) => tenantShell("search", (b) => searchView(b, q)),
  portal: () => tenantShell("portal", portalView),
};

async function appsView(body) {
  show(body, h("h1", {}, "Applications"), loading("applications"));
  const apps = await api("GET", "/api/v1/app?limit=250");
  const list = apps.data.map((a) => {
    const inner = h("div", {});
    const d = h("details", { class: "app" }, h("summary", {}, h("strong", {}, a.name), " ", h("code", { class: "muted" }, a.uid || a.id)), inner);
    d.addEventListener("toggle", () => {
      if (!d.open || inner.dataset.loaded) return;
      inner.dataset.loaded = "1";
      guarded(() => endpointsOf(a, inner), inner);
    });
    return d;
  });
  show(body, h("h1", {}, "Applications"), list.length ? list : empty("No applications yet. Create one with POST /api/v1/app."));
}

async function endpointsOf(app, into) {
  show(into, loading("endpoints"));
  const eps = await api("GET", `/api/v1/app/${seg(app.id)}/endpoint?limit=250`);
  const out = h("div", { "aria-live": "polite" });
  const portal = h("button", {}, "Open this customer's portal");
  portal.addEventListener("click", () => act(portal, out, async () => {
    const access = await api("POST", `/api/v1/auth/app-portal-access/${seg(app.id)}`, {});
    window.open(access.url, "_blank", "noopener");
  }));
  const few = limiter(4);
  const rows = await Promise.all(eps.data.map(async (ep) => {
    const s = await few(() => api("GET", `/api/v1/app/${seg(app.id)}/endpoint/${seg(ep.id)}/stats${qs({ since: daysAgo(7) })}`));
    const health = ep.disabled ? h("span", { class: "pill idle" }, "Disabled")
      : s.fail > 0 && s.success === 0 ? h("span", { class: "pill bad" }, "Failing")
        : s.fail > 0 ? h("span", { class: "pill warn" }, "Some failures") : h("span", { class: "pill ok" }, "Healthy");
    return [ep.url, health, String(s.success), String(s.fail), String(s.pending + s.sending)];
  }));
  const dests = await destinationsOf(app, few);
  show(into, h("div", { class: "actions" }, portal), out,
    rows.length ? table(`Endpoints of ${app.name}`, ["URL", "Health (7 days)", "Delivered", "Failed", "Waiting"], rows) : empty("No endpoints."),
    dests);
}

// Where a destination delivers, from its configuration as the API shows it (no credentials).
function destinationWhere(d) {
  const c = d.config || {};
  const where = c.uri || c.url || c.queueUrl || c.topicArn || c.eventBusName || (c.bucket && `s3://${c.bucket}`);
  return where || (d.type === "pollingEndpoint" ? "read by the customer" : "—");
}

// The application's destinations beyond HTTP (queues, tables, FIFO and polling
// endpoints) and their health: status, why they fail, and 7 days of attempts.
async function destinationsOf(app, few) {
  const list = await api("GET", `/api/v1/app/${seg(app.id)}/destination?limit=250`);
  if (!list.data.length) return [];
  const rows = await Promise.all(list.data.map(async (d) => {
    const s = await few(() => api("GET", `/api/v1/app/${seg(app.id)}/endpoint/${seg(d.id)}/stats${qs({ since: daysAgo(7) })}`));
    const health = d.status === "disabled" ? h("span", { class: "pill idle" }, "Disabled")
      : d.status === "retrying" ? h("span", { class: "pill bad" }, "Retrying") : h("span", { class: "pill ok" }, "Healthy");
    return [d.type, destinationWhere(d), health, d.failureReason || "—", String(s.success), String(s.fail)];
  }));
  return table(`Destinations of ${app.name}`, ["Type", "Where", "Health", "Failure", "Delivered", "Failed"], rows);
}

async function sourcesView(body) {
  show(body, h("h1", {}, "Sources"), loading("sources"));
  const sources = await api("GET", "/api/v1/source?limit=250");
  const list = sources.data.map((src) => {
    const inner = h("div", {});
    const d = h("details", { class: "source" },
      h("summary", {}, h("strong", {}, src.name), src.ingestType ? ` · ingest: ${src.ingestType}` : "", ` · ${src.provider} · ${src.mode}`, src.disabled ? " · disabled" : ""),
      h("p", { class: "wrap" }, "Address: ", h("code", {}, src.url)), inner);
    d.addEventListener("toggle", () => {
      if (!d.open || inner.dataset.loaded) return;
      inner.dataset.loaded = "1";
      guarded(() => eventsOf(src, inner), inner);
    });
    return d;
  });
  show(body, h("h1", {}, "Sources"), list.length ? list : empty("No sources yet. Create one with POST /api/v1/source."));
}

async function eventsOf(src, into) {
  show(into, loading("inbound events"));
  const out = h("div", { "aria-live": "polite" });
  const rotate = h("button", {}, "Rotate signing secret");
  rotate.addEventListener("click", () => act(rotate, out, () => api("POST", `/api/v1/source/${seg(src.id)}/secret/rotate`, {}), "Secret rotated: update it at the provider. The previous one keeps working for its grace period."));
  const events = await api("GET", `/api/v1/source/${seg(src.id)}/event?limit=50`);
  const rows = events.data.map((e) => {
    const replay = h("button", {}, "Replay");
    replay.addEventListener("click", () => act(replay, out, () => api("POST", `/api/v1/source/${seg(src.id)}/event/${seg(e.id)}/replay`, {}), `Replay of ${e.id} scheduled.`));
    return [
      h("button", { class: "link", onclick: () => VIEWS.search(e.id) }, e.id),
      h("code", { class: "any" }, e.key), e.eventType, h("span", { class: `pill ${e.status === "processing" ? "warn" : "ok"}` }, e.status), String(e.duplicates), time(e.receivedAt), replay,
    ];
  });
  show(into, h("div", { class: "actions" }, rotate), out,
    rows.length ? table(`Inbound events of ${src.name}`, ["Event", "Key", "Type", "Status", "Duplicates", "Received", ""], rows)
      : empty("No events received yet."));
}

async function searchView(body, initial) {
  const [qF, q] = field("Message id, event id or idempotency key", { type: "search", value: initial || "" },
    "Finds the event in both directions: the inbound event, the message it became, its deliveries and their attempts.");
  const results = h("div", { "aria-live": "polite" });
  const go = h("button", { class: "primary", type: "submit" }, "Search");
  const form = h("form", { class: "stack", role: "search" }, qF, h("div", { class: "actions" }, go));
  const run = () => guarded(async () => {
    if (!q.value.trim()) { show(results, empty("Type an id or a key to search for.")); return; }
    show(results, loading("results"));
    show(results, found(await api("GET", `/api/v1/search${qs({ q: q.value.trim() })}`)));
  }, results);
  form.addEventListener("submit", (ev) => { ev.preventDefault(); run(); });
  show(body, h("h1", {}, "Search"), form, results);
  if (initial) run(); else q.focus();
}

function found(r) {
  if (!r.inbound.length && !r.messages.length) return empty(`Nothing found for “${r.query}”.`);
  const inbound = r.inbound.map(({ sourceId, event: e }) => h("section", { class: "chain inbound" },
    h("h3", {}, "Inbound event ", h("code", {}, e.id)),
    table("Inbound event", ["Source", "Key", "Type", "Status", "Duplicates caught", "Received"],
      [[h("code", {}, sourceId), h("code", { class: "any" }, e.key), e.eventType, e.status, String(e.duplicates), time(e.receivedAt)]]),
    h("details", {}, h("summary", {}, "Payload as received"), h("pre", {}, pretty(e.payload)))));
  const messages = r.messages.map(({ appId, message: m, deliveries, attempts }) => h("section", { class: "chain message" },
    h("h3", {}, "Message ", h("code", {}, m.id)),
    h("p", {}, h("code", {}, m.eventType), " · application ", h("code", {}, appId), m.eventId ? [" · eventId ", h("code", {}, m.eventId)] : "", " · ", time(m.timestamp)),
    h("details", {}, h("summary", {}, "Payload"), h("pre", {}, pretty(m.payload))),
    h("h3", {}, "Deliveries"),
    deliveries.length ? table("Deliveries", ["Endpoint", "Status", "Next attempt"],
      deliveries.map((d) => [d.endpoint.url, status(d.statusText), d.nextAttempt ? time(d.nextAttempt) : "—"])) : empty("No endpoint takes this message."),
    h("h3", {}, "Attempts"),
    attempts.length ? table("Attempts", ["When", "Endpoint", "Status", "Response", "Latency"],
      attempts.map((a) => [time(a.timestamp), a.url, status(a.statusText),
        h("div", {}, a.responseStatusCode ? `HTTP ${a.responseStatusCode}` : "No response", a.response ? h("pre", {}, a.response) : null),
        `${a.responseDurationMs} ms`])) : empty("No attempt yet.")));
  return h("div", {},
    inbound.length ? [h("h2", {}, "Received")].concat(inbound) : null,
    messages.length ? [h("h2", {}, "Sent")].concat(messages) : null);
}

async function portalView(body) {
  const s = await api("GET", "/api/v1/settings/portal");
  const [nameF, name] = field("Display name", { type: "text", value: s.displayName || "" }, "Shown at the top of your customers' portal.");
  const [logoF, logo] = field("Logo URL", { type: "url", value: s.logoUrl || "" }, "An https image.");
  const [colorF, color] = field("Primary colour", { type: "text", value: s.primaryColor || "", placeholder: "#3559e0" }, "As #rrggbb.");
  const theme = h("select", { id: "p-theme" }, ["auto", "light", "dark"].map((t) => h("option", { value: t, selected: t === (s.theme || "auto") }, t)));
  const [framesF, frames] = field("Origins that may embed the portal", { tag: "textarea", rows: 3, value: (s.frameAncestors || []).join("\n") },
    "One origin per line, such as https://app.example.com. None: the portal cannot be framed.");
  const out = h("div", { "aria-live": "polite" });
  const save = h("button", { class: "primary", type: "submit" }, "Save branding");
  const form = h("form", { class: "stack" }, nameF, logoF, colorF, h("div", {}, h("label", { for: "p-theme" }, "Theme"), theme), framesF,
    h("div", { class: "actions" }, save), out);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    act(save, out, () => api("PUT", "/api/v1/settings/portal", {
      displayName: name.value || null, logoUrl: logo.value || null, primaryColor: color.value || null, theme: theme.value,
      frameAncestors: frames.value.split(/\s+/).filter(Boolean),
    }), "Saved. New portal pages use it at once.");
  });
  show(body, h("h1", {}, "Portal branding"), form);
}

// --- start ------------------------------------------------------------------------------------

function start() {
  const token = session.get(KEY);
  if (!token) { login(); return; }
  api = client(token);
  if (token.startsWith("hgk_")) {
    header("Tenant");
    VIEWS.apps();
  } else {
    header("Operator");
    guarded(() => tenantsView());
  }
}

start();

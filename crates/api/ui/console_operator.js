// console_operator.js: the operator's console: every tenant with its last day, a
// tenant's page (overview against quotas, settings, keys, applications read as
// the tenant sees them, audit log), and the fleet's health.
import { h, show, client, seg, qs, time, loading, empty, field, table, act, limiter, confirmDialog } from "./dom.js";
import { openApp } from "./console_apps.js";
import { auditLog } from "./console_audit.js";

const pct = (x) => `${(x * 100).toFixed(1)} %`;
const MOST_TENANTS = 1000;
const QUOTAS = [
  ["apiRequestsPerSecond", "API requests a second"], ["messagesPerSecond", "Messages a second"],
  ["messagesPerDay", "Messages a day"], ["inboundPerSecond", "Inbound events a second"],
  ["endpointsPerApp", "Endpoints per application"], ["appsPerTenant", "Applications"],
];
const figure = (label, value, extra) => h("div", { class: "figure" }, h("span", { class: "muted small" }, label), h("strong", {}, value), extra || null);
const limitText = (v) => (v ? v.toLocaleString("en") : "no limit");

export function operatorViews(shell) {
  const { main } = shell;
  const api = (...a) => shell.api(...a);
  const nav = h("nav", { class: "who-nav", "aria-label": "Console" },
    h("button", { class: "link", onclick: () => go.tenants() }, "Tenants"),
    h("button", { class: "link", onclick: () => go.fleet() }, "Fleet health"));
  const go = {
    tenants: (notice) => shell.guarded(() => tenantsView(notice)),
    tenant: (id, tab, notice) => shell.guarded(() => tenantPage(id, tab, notice)),
    fleet: () => shell.guarded(fleetView),
  };

  /** Disables or enables a tenant; disabling asks first. */
  async function toggle(t, button, out, after) {
    if (!t.disabled) {
      const sure = await confirmDialog({
        title: `Disable ${t.name}?`,
        text: "Its API keys, portal links and sources stop answering at once, and nothing is delivered for it until it is enabled again. Nothing is deleted.",
        confirm: `Disable ${t.name}`,
      });
      if (!sure) return;
    }
    await act(button, out, async () => {
      await api("PATCH", `/admin/v1/tenant/${seg(t.id)}`, { disabled: !t.disabled });
      await after(h("p", { class: "notice", role: "status" }, `${t.name} is ${t.disabled ? "enabled" : "disabled"}.`));
    });
  }

  async function tenantsView(notice) {
    const view = shell.begin();
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
    // just made one must see it.
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
    if (!shell.current(view)) return;
    const few = limiter(4);
    const rows = tenants.map((t) => {
      const cells = Array.from({ length: 6 }, () => h("td", {}, h("span", { class: "muted" }, "…")));
      shell.guarded(async () => {
        const s = await few(() => api("GET", `/admin/v1/tenant/${seg(t.id)}/stats`));
        [s.messages, s.inboundEvents, s.duplicates, pct(s.failureRate), s.pendingDeliveries].forEach((v, i) => show(cells[i], String(v)));
        show(cells[5], s.oldestPending ? time(s.oldestPending) : "—");
      }, cells[0]);
      const button = h("button", {}, t.disabled ? "Enable" : "Disable");
      button.addEventListener("click", () => toggle(t, button, out, (n) => tenantsView(n)));
      return [
        h("button", { class: "link", onclick: () => go.tenant(t.id, "overview") }, t.name),
        t.disabled ? h("span", { class: "pill bad" }, "Disabled") : h("span", { class: "pill ok" }, "Active"),
        ...cells, button,
      ];
    });
    show(main, h("h1", {}, "Tenants"), form,
      h("h2", {}, "The last 24 hours"),
      more ? h("p", { class: "notice" }, `The first ${MOST_TENANTS} tenants are shown.`) : null,
      rows.length ? table("Tenants", ["Tenant", "Status", "Messages", "Inbound", "Duplicates caught", "Failure rate", "Pending", "Oldest pending", ""], rows)
        : empty("No tenants yet. Create the first one above."));
  }

  const TABS = [["overview", "Overview"], ["settings", "Settings"], ["keys", "API keys"], ["apps", "Applications"], ["audit", "Audit log"]];

  async function tenantPage(id, tab, notice) {
    const view = shell.begin();
    show(main, loading("the tenant"));
    const t = await api("GET", `/admin/v1/tenant/${seg(id)}`);
    if (!shell.current(view)) return;
    const body = h("div", { role: "tabpanel", id: "tab-body", "aria-labelledby": `tab-${tab}`, tabindex: "-1" });
    const out = h("div", { "aria-live": "polite" }, notice || null);
    const button = h("button", { class: t.disabled ? "" : "danger" }, t.disabled ? "Enable" : "Disable");
    button.addEventListener("click", () => toggle(t, button, out, (n) => tenantPage(id, tab, n)));
    show(main, h("button", { class: "link", onclick: () => go.tenants() }, "← All tenants"),
      h("h1", {}, t.name),
      h("p", { class: "muted" }, h("code", {}, t.id), t.uid ? ` · uid ${t.uid}` : "", " · created ", time(t.createdAt), " · ",
        t.disabled ? h("span", { class: "pill bad" }, "Disabled") : h("span", { class: "pill ok" }, "Active"), " ", button),
      out,
      h("div", { class: "tabs", role: "tablist", "aria-label": "Tenant sections" },
        TABS.map(([k, label]) => h("button", { role: "tab", id: `tab-${k}`, "aria-selected": String(k === tab), "aria-controls": "tab-body",
          onclick: () => go.tenant(id, k) }, label))),
      body);
    const fill = { overview, settings, keys, apps, audit: (b, x) => auditLog(shell, b, `/admin/v1/tenant/${seg(x.id)}/audit`) }[tab];
    await shell.guarded(() => fill(body, t), body);
  }

  async function overview(body, t) {
    show(body, loading("the tenant's figures"));
    const today = new Date().toISOString().slice(0, 10);
    const inspect = client(shell.token, { "Hookgate-Tenant": t.id });
    const [s, usage, apps] = await Promise.all([
      api("GET", `/admin/v1/tenant/${seg(t.id)}/stats`),
      api("GET", `/admin/v1/tenant/${seg(t.id)}/usage${qs({ from: today, to: today })}`),
      inspect("GET", "/api/v1/app?limit=250"),
    ]);
    const day = usage.data[0] || {};
    const q = t.quotas.effective;
    const against = (used, limit) => {
      if (!limit) return h("span", { class: "muted small" }, "no limit");
      const bar = h("span", {});
      // Set through the CSSOM: the pages' policy refuses style attributes.
      bar.style.width = `${(Math.min(1, used / limit) * 100).toFixed(1)}%`;
      return h("div", {}, h("span", { class: "muted small" }, `of ${limitText(limit)}`),
        h("div", { class: `meter${used >= limit ? " over" : ""}`, role: "meter", "aria-valuemin": "0", "aria-valuemax": String(limit), "aria-valuenow": String(Math.min(used, limit)), "aria-label": "Share of the quota used" }, bar));
    };
    const appCount = apps.data.length + (apps.done ? 0 : 1);
    show(body,
      h("h2", {}, "Against its quotas"),
      h("div", { class: "figures" },
        figure("Messages today (UTC)", String(day.messagesCreated || 0), against(day.messagesCreated || 0, q.messagesPerDay)),
        figure("Applications", apps.done ? String(appCount) : `${apps.data.length}+`, against(appCount, q.appsPerTenant)),
        figure("API requests a second", limitText(q.apiRequestsPerSecond)),
        figure("Messages a second", limitText(q.messagesPerSecond)),
        figure("Inbound events a second", limitText(q.inboundPerSecond)),
        figure("Endpoints per application", limitText(q.endpointsPerApp))),
      h("h2", {}, "The last 24 hours"),
      h("div", { class: "figures" },
        figure("Messages", String(s.messages)), figure("Inbound events", String(s.inboundEvents)),
        figure("Duplicates caught", String(s.duplicates)), figure("Attempts failed", `${s.failedAttempts} of ${s.attempts} (${pct(s.failureRate)})`),
        figure("Deliveries waiting", String(s.pendingDeliveries)), figure("Oldest waiting since", s.oldestPending ? time(s.oldestPending) : "—")),
      h("p", { class: "muted" }, `Messages are kept ${t.retention.effective.messageDays} days, inbound events ${t.retention.effective.inboundDays} days. `,
        `Transformations are ${t.transformations ? "on" : "off"}.`));
  }

  function settings(body, t) {
    const num = (label, value, hint) => field(label, { type: "number", min: "0", step: "1", value: value ?? "", placeholder: "default" }, hint);
    const [nameF, name] = field("Name", { type: "text", value: t.name, required: true });
    const [msgF, msgDays] = num("Keep messages (days)", t.retention.messageDays, `Empty: the default (${t.retention.effective.messageDays} now).`);
    const [inF, inDays] = num("Keep inbound events (days)", t.retention.inboundDays, `Empty: the default (${t.retention.effective.inboundDays} now).`);
    const quotaFields = QUOTAS.map(([k, label]) => [k, ...num(label, t.quotas[k], `Empty: the default (${limitText(t.quotas.effective[k])}). 0: no limit.`)]);
    const check = (label, checked, hint) => {
      const id = `s-${Math.random().toString(36).slice(2, 8)}`;
      const box = h("input", { type: "checkbox", id, checked: checked ? true : null });
      return [h("div", { class: "check" }, box, h("label", { for: id }, label), hint ? h("p", { class: "hint" }, hint) : null), box];
    };
    const [trF, tr] = check("Run endpoint transformations", t.transformations, "Tenant-written JavaScript, run in a confined process.");
    const [svF, sv] = check("Send the svix-* header aliases", t.svixHeaders, "For receivers written against Svix.");
    const out = h("div", { "aria-live": "polite" });
    const save = h("button", { class: "primary", type: "submit" }, "Save settings");
    const days = (el) => (el.value === "" ? null : Number(el.value));
    const form = h("form", { class: "stack" },
      nameF, h("h2", {}, "Retention"), h("div", { class: "grid2" }, msgF, inF),
      h("h2", {}, "Quotas"), h("div", { class: "grid2" }, quotaFields.map(([, f]) => f)),
      h("h2", {}, "Switches"), trF, svF,
      h("div", { class: "actions" }, save), out);
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const quotas = Object.fromEntries(quotaFields.map(([k, , input]) => [k, input.value === "" ? null : Number(input.value)]));
      act(save, out, async () => {
        await api("PATCH", `/admin/v1/tenant/${seg(t.id)}`, {
          name: name.value.trim(), retention: { messageDays: days(msgDays), inboundDays: days(inDays) },
          quotas, transformations: tr.checked, svixHeaders: sv.checked,
        });
        await go.tenant(t.id, "settings", h("p", { class: "notice", role: "status" }, "Settings saved."));
      });
    });
    show(body, form);
  }

  async function keys(body, t) {
    show(body, loading("keys"));
    const list = await api("GET", `/admin/v1/tenant/${seg(t.id)}/api-key`);
    const out = h("div", { "aria-live": "polite" });
    const [labelF, label] = field("Label of the new key", { type: "text", maxlength: "100", placeholder: "such as: billing service" }, "Says who or what holds it; the key itself is shown once.");
    const issue = h("button", { class: "primary", type: "submit" }, "Issue a new key");
    const form = h("form", { class: "stack" }, labelF, h("div", { class: "actions" }, issue));
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      act(issue, out, async () => {
        const k = await api("POST", `/admin/v1/tenant/${seg(t.id)}/api-key`, { label: label.value.trim() || null });
        await go.tenant(t.id, "keys", h("div", { class: "notice", role: "status" }, h("p", {}, `New key${k.label ? ` “${k.label}”` : ""}, shown once: copy it now.`), h("p", {}, h("span", { class: "secret", id: "new-api-key" }, k.apiKey))));
      });
    });
    const rows = list.data.map((k) => {
      const input = h("input", { type: "text", value: k.label || "", maxlength: "100", "aria-label": `Label of key ${k.id}` });
      const rename = h("button", {}, "Save label");
      rename.addEventListener("click", () => act(rename, out, () => api("PATCH", `/admin/v1/tenant/${seg(t.id)}/api-key/${seg(k.id)}`, { label: input.value.trim() || null }), `Key ${k.id} relabelled.`));
      let end = h("span", {}, "Revoked ", time(k.revokedAt));
      if (!k.revokedAt) {
        end = h("button", { class: "danger" }, "Revoke");
        end.addEventListener("click", async () => {
          const sure = await confirmDialog({ title: `Revoke ${k.label || k.id}?`, text: "Whatever uses this key is refused from now on, and the portal links it made stop working. This cannot be undone.", confirm: "Revoke the key" });
          if (sure) {
            await act(end, out, async () => {
              await api("DELETE", `/admin/v1/tenant/${seg(t.id)}/api-key/${seg(k.id)}`);
              await go.tenant(t.id, "keys", h("p", { class: "notice", role: "status" }, `Key ${k.id} revoked.`));
            });
          }
        });
      }
      return [h("code", {}, k.id), h("div", { class: "actions" }, input, rename), time(k.createdAt), end];
    });
    show(body, form, out, rows.length ? table("API keys", ["Key", "Label", "Issued", ""], rows) : empty("No keys."));
  }

  async function apps(body, t) {
    show(body, loading("applications"));
    const inspect = client(shell.token, { "Hookgate-Tenant": t.id });
    const list = await inspect("GET", "/api/v1/app?limit=250");
    const back = () => shell.guarded(() => apps(body, t), body);
    show(body,
      h("p", { class: "muted" }, "The tenant's applications as its customers see them, read only. Each view is recorded in the tenant's audit log."),
      list.data.length ? table("Applications", ["Application", "Id", "Created"], list.data.map((a) => [
        h("button", { class: "link", onclick: () => shell.guarded(() => openApp(shell, body, inspect, a, { readOnly: true, back }), body) }, a.name),
        h("code", {}, a.uid || a.id), time(a.createdAt)]))
        : empty("This tenant has no applications yet."));
  }

  async function fleetView() {
    const view = shell.begin();
    show(main, h("h1", {}, "Fleet health"), loading("the fleet's health"));
    const f = await api("GET", "/admin/v1/health");
    if (!shell.current(view)) return;
    const pg = f.postgres;
    const late = f.backlog && f.backlog.oldestDue ? Math.max(0, (Date.parse(f.at) - Date.parse(f.backlog.oldestDue)) / 1000) : 0;
    const pill = (ok, yes, no) => h("span", { class: `pill ${ok ? "ok" : "bad"}` }, ok ? yes : no);
    show(main, h("h1", {}, "Fleet health"),
      h("p", { class: "muted" }, "As of ", time(f.at), ". ", h("button", { class: "link", onclick: () => go.fleet() }, "Refresh")),
      h("div", { class: "figures" },
        figure("Postgres", pill(pg.up, "Up", "Down"), h("span", { class: "muted small" }, pg.up ? `answered in ${pg.latencyMs} ms` : pg.error)),
        figure("Redis", pill(f.redis !== "down", f.redis === "disabled" ? "Not used" : "Up", "Down")),
        figure("Deliveries waiting", f.backlog ? f.backlog.waiting.toLocaleString("en") : "—"),
        figure("Due now or in flight", f.backlog ? f.backlog.due.toLocaleString("en") : "—"),
        figure("Most overdue", f.backlog && f.backlog.oldestDue ? `${late.toFixed(1)} s` : "nothing overdue"),
        figure("Workers reporting", String(f.workers.length))),
      h("h2", {}, "Delivery workers"),
      f.workers.length ? table("Delivery workers", ["Worker", "Behind by", "Last report"], f.workers.map((w) => [
        h("code", {}, w.name), w.pressureMs ? `${w.pressureMs} ms` : "keeping up", time(w.seenAt)]))
        : empty("No worker reported in the last minute."),
      h("h2", {}, "Connections of this process"),
      table("Connection pools", ["Pool", "Open", "Idle", "Most"], pg.pools.map((p) => [p.name, String(p.size), String(p.idle), String(p.max)])));
  }

  return { nav, home: () => go.tenants() };
}

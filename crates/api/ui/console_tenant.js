// console_tenant.js: the tenant's console: its applications (created, renamed,
// opened to their endpoints and log, and a portal link minted for a customer),
// its event types, its sources, search in both directions, the portal's branding
// and its audit log.
import { h, show, seg, qs, loading, empty, field, table, act, copyButton } from "./dom.js";
import { openApp } from "./console_apps.js";
import { auditLog } from "./console_audit.js";
import { sourcesView, searchView, brandingView } from "./console_more.js";

const TABS = [["apps", "Applications"], ["types", "Event types"], ["sources", "Sources"], ["search", "Search"], ["portal", "Portal branding"], ["audit", "Audit log"]];
const EXPIRIES = [[3600, "1 hour"], [86400, "1 day"], [7 * 86400, "7 days"], [30 * 86400, "30 days"]];

/** Opens a portal link in a new tab: only an http(s) address, whatever the answer held. */
function openLink(url) {
  const u = new URL(url, location.href);
  if (u.protocol === "https:" || u.protocol === "http:") window.open(u.href, "_blank", "noopener");
}

export function tenantViews(shell) {
  const { main } = shell;
  const api = (...a) => shell.api(...a);
  const go = {};
  const shellOf = (tab, fill) => () => {
    shell.begin();
    const body = h("div", { role: "tabpanel", id: "tab-body", "aria-labelledby": `tab-${tab}`, tabindex: "-1" });
    show(main, h("div", { class: "tabs", role: "tablist", "aria-label": "Console sections" },
      TABS.map(([k, label]) => h("button", { role: "tab", id: `tab-${k}`, "aria-selected": String(k === tab), "aria-controls": "tab-body",
        onclick: () => go[k]() }, label))), body);
    return shell.guarded(() => fill(body), body);
  };

  /** A portal link for one customer: read-only or not, and how long it lives. */
  function portalLink(app) {
    const id = `pl-${app.id}`;
    const ro = h("input", { type: "checkbox", id: `${id}-ro` });
    const exp = h("select", { id: `${id}-exp` }, EXPIRIES.map(([s, label]) => h("option", { value: String(s), selected: s === 7 * 86400 ? true : null }, label)));
    const out = h("div", { "aria-live": "polite" });
    const mint = h("button", { type: "submit" }, "Make a portal link");
    const form = h("form", { class: "actions portal-link", "aria-label": `Portal link for ${app.name}` },
      h("div", { class: "check" }, ro, h("label", { for: `${id}-ro` }, "Read-only")),
      h("div", {}, h("label", { for: `${id}-exp` }, "Valid for"), exp), mint);
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      act(mint, out, async () => {
        const a = await api("POST", `/api/v1/auth/app-portal-access/${seg(app.id)}`, { readOnly: ro.checked, expiry: Number(exp.value) });
        show(out, h("div", { class: "notice", role: "status" },
          h("p", {}, `${ro.checked ? "Read-only link" : "Link"} for ${app.name}, valid for ${exp.selectedOptions[0].textContent}:`),
          h("p", { class: "wrap" }, h("code", { class: "any" }, a.url)),
          h("div", { class: "actions" }, copyButton("Copy link", a.url), h("button", { type: "button", onclick: () => openLink(a.url) }, "Open it"))));
      });
    });
    return h("div", {}, form, out);
  }

  async function appsView(body, notice) {
    show(body, h("h1", {}, "Applications"), loading("applications"));
    const list = await api("GET", "/api/v1/app?limit=250");
    const [nameF, name] = field("Name", { type: "text", required: true, maxlength: "256" });
    const [uidF, uid] = field("Your id for it (optional)", { type: "text", pattern: "[a-zA-Z0-9\\-_.]{1,256}" }, "Letters, digits, - _ and . only: how your systems name this customer.");
    const out = h("div", { "aria-live": "polite" }, notice || null);
    const create = h("button", { class: "primary", type: "submit" }, "Create application");
    const form = h("form", { class: "stack" }, h("div", { class: "grid2" }, nameF, uidF), h("div", { class: "actions" }, create));
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      if (!name.value.trim()) { show(out, h("p", { class: "error", role: "alert" }, "Give the application a name.")); return; }
      act(create, out, async () => {
        const a = await api("POST", "/api/v1/app", { name: name.value.trim(), uid: uid.value.trim() || null });
        await appsView(body, h("p", { class: "notice", role: "status" }, `Created ${a.name}.`));
      });
    });
    const back = () => go.apps();
    const cards = list.data.map((a) => {
      const rename = h("input", { type: "text", value: a.name, "aria-label": `New name of ${a.name}`, maxlength: "256" });
      const save = h("button", {}, "Rename");
      const said = h("div", { "aria-live": "polite" });
      save.addEventListener("click", () => act(save, said, () => api("PATCH", `/api/v1/app/${seg(a.id)}`, { name: rename.value.trim() }), "Renamed."));
      return h("details", { class: "app" },
        h("summary", {}, h("strong", {}, a.name), " ", h("code", { class: "muted" }, a.uid || a.id)),
        h("div", { class: "actions" },
          h("button", { class: "primary", onclick: () => shell.guarded(() => openApp(shell, body, shell.api, a, { readOnly: false, back }), body) }, "Open endpoints and messages"),
          rename, save),
        said, portalLink(a));
    });
    show(body, h("h1", {}, "Applications"), h("h2", {}, "New application"), form, out,
      h("h2", {}, "Your applications"), cards.length ? cards : empty("No applications yet. Create the first one above."));
  }

  async function typesView(body, notice) {
    show(body, h("h1", {}, "Event types"), loading("event types"));
    const list = await api("GET", `/api/v1/event-type${qs({ limit: 250, include_archived: "true", with_content: "true" })}`);
    const out = h("div", { "aria-live": "polite" }, notice || null);
    const [nameF, name] = field("Name", { type: "text", required: true, placeholder: "invoice.paid" }, "Group related types with a dotted prefix: the portal's catalog groups them so.");
    const [descF, desc] = field("Description", { type: "text", maxlength: "1000" });
    const [schemaF, schema] = field("JSON Schema (optional)", { tag: "textarea", rows: 5, placeholder: '{"type": "object", "properties": {"id": {"type": "string"}}}' }, "Shown to customers in the event catalog with an example.");
    const create = h("button", { class: "primary", type: "submit" }, "Create event type");
    const form = h("form", { class: "stack" }, h("div", { class: "grid2" }, nameF, descF), schemaF, h("div", { class: "actions" }, create));
    const parse = (text) => {
      if (!text.trim()) return { ok: true, value: null };
      try { return { ok: true, value: { 1: JSON.parse(text) } }; } catch (e) { return { ok: false }; }
    };
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const s = parse(schema.value);
      if (!s.ok) { show(out, h("p", { class: "error", role: "alert" }, "The schema is not valid JSON.")); return; }
      act(create, out, async () => {
        await api("POST", "/api/v1/event-type", { name: name.value.trim(), description: desc.value.trim(), schemas: s.value });
        await typesView(body, h("p", { class: "notice", role: "status" }, `Created ${name.value.trim()}.`));
      });
    });
    const rows = list.data.map((et) => {
      const d = h("input", { type: "text", value: et.description || "", "aria-label": `Description of ${et.name}` });
      const save = h("button", {}, "Save");
      const archive = h("button", {}, et.archived ? "Restore" : "Archive");
      save.addEventListener("click", () => act(save, out, () => api("PATCH", `/api/v1/event-type/${seg(et.name)}`, { description: d.value.trim() }), `${et.name} saved.`));
      archive.addEventListener("click", () => act(archive, out, async () => {
        await api("PATCH", `/api/v1/event-type/${seg(et.name)}`, { archived: !et.archived });
        await typesView(body, h("p", { class: "notice", role: "status" }, `${et.name} ${et.archived ? "restored" : "archived"}.`));
      }));
      // The newest version of its schema, edited as text; saved as version 1 as the form above makes it.
      const versions = Object.keys(et.schemas || {}).sort((a, b) => Number(b) - Number(a));
      const current = versions.length ? JSON.stringify(et.schemas[versions[0]], null, 2) : "";
      const schemaIn = h("textarea", { rows: 6, "aria-label": `JSON Schema of ${et.name}` });
      schemaIn.value = current;
      const saveSchema = h("button", {}, "Save schema");
      saveSchema.addEventListener("click", () => {
        const s = parse(schemaIn.value);
        if (s.ok && !s.value) { show(out, h("p", { class: "error", role: "alert" }, `Write the schema of ${et.name} as JSON first.`)); return; }
        if (!s.ok) { show(out, h("p", { class: "error", role: "alert" }, `The schema of ${et.name} is not valid JSON.`)); return; }
        act(saveSchema, out, () => api("PATCH", `/api/v1/event-type/${seg(et.name)}`, { schemas: s.value }), `The schema of ${et.name} is saved.`);
      });
      const schemaBox = h("details", {}, h("summary", {}, versions.length ? "Schema" : "No schema: add one"), schemaIn, h("div", { class: "actions" }, saveSchema));
      return [h("code", {}, et.name), h("div", { class: "actions" }, d, save), schemaBox,
        et.archived ? h("span", { class: "pill idle" }, "Archived") : h("span", { class: "pill ok" }, "Active"), archive];
    });
    show(body, h("h1", {}, "Event types"), h("h2", {}, "New event type"), form, out,
      h("h2", {}, "Your event types"),
      rows.length ? table("Event types", ["Name", "Description", "Schema", "Status", ""], rows) : empty("No event types yet."));
  }

  Object.assign(go, {
    apps: shellOf("apps", (b) => appsView(b)),
    types: shellOf("types", (b) => typesView(b)),
    sources: shellOf("sources", (b) => sourcesView(shell, b, go)),
    search: (q) => shellOf("search", (b) => searchView(shell, b, q))(),
    portal: shellOf("portal", (b) => brandingView(shell, b)),
    audit: shellOf("audit", (b) => auditLog(shell, b, "/api/v1/audit")),
  });
  return { nav: null, home: () => go.apps() };
}

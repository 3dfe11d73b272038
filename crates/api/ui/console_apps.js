// console_apps.js: an application's endpoints, message log and event catalog in
// the console, drawn by the portal's own views: read-only for the operator
// looking into a tenant, editable for the tenant itself.
import { h, show } from "./dom.js";
import { appContext, sectionNav } from "./app_ctx.js";

/** Opens application `app` in `into`, with `api` (the tenant's key, or the
 * operator's inspection); `back` returns to the list it was chosen from. */
export async function openApp(shell, into, api, app, { readOnly, back }) {
  const appMain = h("div", { class: "app-views", tabindex: "-1" });
  const ctx = appContext(appMain, { appId: app.id, owner: "the tenant", expired: (e) => shell.expired(e) });
  ctx.api = api;
  ctx.readOnly = readOnly;
  ctx.inspecting = readOnly;
  const { nav, draw } = sectionNav(ctx, `Sections of ${app.name}`,
    h("button", { class: "link", onclick: back }, "← Applications"));
  ctx.sections = draw;
  show(into, h("h2", {}, app.name, " ", h("code", { class: "muted small" }, app.uid || app.id)),
    readOnly ? h("p", { class: "readonly-banner", role: "note" }, "You are looking at the tenant's data: nothing here can be changed, and each view is recorded in the tenant's audit log.") : null,
    nav, appMain);
  const types = await api("GET", "/api/v1/event-type?limit=250");
  ctx.catalog = types.data.filter((t) => !t.archived);
  await ctx.go.endpoints();
}

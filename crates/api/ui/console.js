// console.js: the agency's console. With the admin token it shows the operator's
// view (tenants, a tenant's page, the fleet's health); with a tenant's API key,
// the tenant's (applications, event types, sources, search, branding, audit log).
// Either credential is kept for this tab and sent only as an Authorization header.
import { h, show, client, errorBox, field, act, session, ApiError } from "./dom.js";
import { operatorViews } from "./console_operator.js";
import { tenantViews } from "./console_tenant.js";

const main = document.getElementById("main");
const who = document.getElementById("who");
const KEY = "hookgate.console";

/** What every view of the console is given. */
const shell = {
  main,
  api: null,
  token: null,
  // Which view was asked for last: one that loads after another was asked for
  // does not show over it.
  seq: 0,
  begin() { shell.seq += 1; return shell.seq; },
  current(view) { return view === shell.seq; },
  /** True (and the sign-in shown) when `e` says the credential is no longer valid. */
  expired(e) {
    if (e instanceof ApiError && e.status === 401) {
      session.drop(KEY);
      show(who);
      login("That credential is not valid any more. Sign in again.");
      return true;
    }
    return false;
  },
  /** Runs a view's work, its error shown in `into` (the page by default). */
  async guarded(fn, into = main) {
    const view = shell.seq;
    try { await fn(); } catch (e) {
      if (!shell.expired(e) && (into !== main || shell.current(view))) show(into, errorBox(e));
    }
  },
};

function signOut() {
  session.drop(KEY);
  shell.api = null;
  show(who);
  login();
}

function login(message) {
  shell.begin();
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
      await client(token)("GET", token.startsWith("hgk_") ? "/api/v1/app?limit=1" : "/admin/v1/tenant?limit=1");
      session.set(KEY, token);
      start();
    });
  });
  show(main, h("h1", {}, "Sign in"), form);
  input.focus();
}

function start() {
  const token = session.get(KEY);
  if (!token) { login(); return; }
  shell.token = token;
  shell.api = client(token);
  const tenant = token.startsWith("hgk_");
  const views = tenant ? tenantViews(shell) : operatorViews(shell);
  show(who, h("span", {}, tenant ? "Tenant" : "Operator"),
    views.nav || null, h("button", { onclick: signOut }, "Sign out"));
  views.home();
}

start();

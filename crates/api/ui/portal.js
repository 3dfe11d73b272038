// portal.js: the customer portal's shell. It opens with an app-portal token in
// the URL fragment (never sent to a server), keeps it for this tab, asks what the
// token may do, and shows the application's endpoints, its message log and its
// event catalog. Every call is to the application's own /api/v1 routes; the
// server confines the token to that application whatever this page asks.
import { h, show, client, session, ApiError } from "./dom.js";
import { appContext, sectionNav } from "./app_ctx.js";

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

// A key in the fragment replaces the one kept for this tab (only a key of this
// page's tenant: another's would end a working link and show nothing), then
// leaves the address bar and the history: a copied URL does not carry it.
function token() {
  const m = /[#&]key=([^&]+)/.exec(location.hash);
  if (m) {
    let raw = null;
    try { raw = decodeURIComponent(m[1]); } catch (_) { /* a mangled link: treated as no key */ }
    history.replaceState(null, "", location.pathname + location.search);
    if (raw && tokenTenant(raw) === dec(parts[1])) session.set(storeKey, raw);
    else if (raw) return { refused: true, key: session.get(storeKey) };
  }
  return { key: session.get(storeKey) };
}

/** What every view is given: the API client, the application's base path, the
 * catalog, whether the link only reads, and the ways to move between views. */
const ctx = appContext(main, {
  appId,
  owner,
  // Which start of the page (a new link in the tab starts it again) the client,
  // and each error it throws, belong to: an old link's answers change nothing.
  expired(e) {
    if (e instanceof ApiError && e.gen !== undefined && e.gen !== ctx.gen) return true;
    if (e instanceof ApiError && e.status === 401) {
      session.drop(storeKey);
      show(main, h("h1", {}, "This link has expired"),
        h("p", {}, `Portal links are valid for a limited time. Ask ${owner} for a new one.`));
      return true;
    }
    return false;
  },
});

// The sections, above every view; the current one is marked for screen readers.
const { nav, draw } = sectionNav(ctx, "Portal sections");
ctx.sections = draw;
const banner = h("p", { class: "readonly-banner", role: "note", hidden: true },
  "Read-only link: you can look at everything here, but not change anything.");

async function start() {
  const { key, refused } = token();
  if (refused && ctx.api) {
    show(main, h("p", { class: "error", role: "alert" }, "That link is for another service's portal: it was not opened here."));
    return;
  }
  ctx.gen += 1;
  const gen = ctx.gen;
  ctx.begin();
  // Nothing of the previous link shows while this one loads.
  ctx.readOnly = false;
  banner.hidden = true;
  document.body.classList.remove("read-only");
  if (!key) {
    ctx.api = null;
    nav.remove();
    show(main, h("h1", {}, "This link is incomplete"), h("p", {}, `It is missing its access key. Ask ${owner} for a new portal link.`));
    return;
  }
  const call = client(key);
  ctx.api = (...args) => call(...args).catch((e) => { if (e instanceof ApiError) e.gen = gen; throw e; });
  main.before(banner, nav);
  show(main, h("p", { class: "loading", role: "status" }, "Loading…"));
  let ready = false;
  await ctx.guarded(async () => {
    const [me, types] = await Promise.all([ctx.api("GET", "/api/v1/auth/whoami"), ctx.api("GET", "/api/v1/event-type?limit=250")]);
    if (gen !== ctx.gen) return;
    ctx.readOnly = me.readOnly === true;
    document.body.classList.toggle("read-only", ctx.readOnly);
    banner.hidden = !ctx.readOnly;
    ctx.catalog = types.data.filter((t) => !t.archived);
    ready = true;
  });
  if (ready && gen === ctx.gen) await ctx.go.endpoints();
}

applyBranding();
// A new link opened in the same tab (another `#key=`) takes effect at once.
window.addEventListener("hashchange", () => { if (/[#&]key=/.test(location.hash)) start(); });
start();

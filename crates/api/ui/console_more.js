// console_more.js: the tenant's sources and their inbound events, search in both
// directions (an inbound event, the message it became, its deliveries and
// attempts), and the portal's branding.
import { h, show, qs, seg, time, status, pretty, loading, empty, field, table, act } from "./dom.js";

export async function sourcesView(shell, body, go) {
  const api = (...a) => shell.api(...a);
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
      shell.guarded(() => eventsOf(shell, go, src, inner), inner);
    });
    return d;
  });
  show(body, h("h1", {}, "Sources"), list.length ? list : empty("No sources yet. Create one with POST /api/v1/source."));
}

async function eventsOf(shell, go, src, into) {
  const api = (...a) => shell.api(...a);
  show(into, loading("inbound events"));
  const out = h("div", { "aria-live": "polite" });
  const rotate = h("button", {}, "Rotate signing secret");
  rotate.addEventListener("click", () => act(rotate, out, () => api("POST", `/api/v1/source/${seg(src.id)}/secret/rotate`, {}), "Secret rotated: update it at the provider. The previous one keeps working for its grace period."));
  const events = await api("GET", `/api/v1/source/${seg(src.id)}/event?limit=50`);
  const rows = events.data.map((e) => {
    const replay = h("button", {}, "Replay");
    replay.addEventListener("click", () => act(replay, out, () => api("POST", `/api/v1/source/${seg(src.id)}/event/${seg(e.id)}/replay`, {}), `Replay of ${e.id} scheduled.`));
    return [
      h("button", { class: "link", onclick: () => go.search(e.id) }, e.id),
      h("code", { class: "any" }, e.key), e.eventType, h("span", { class: `pill ${e.status === "processing" ? "warn" : "ok"}` }, e.status), String(e.duplicates), time(e.receivedAt), replay,
    ];
  });
  show(into, h("div", { class: "actions" }, rotate), out,
    rows.length ? table(`Inbound events of ${src.name}`, ["Event", "Key", "Type", "Status", "Duplicates", "Received", ""], rows)
      : empty("No events received yet."));
}

export async function searchView(shell, body, initial) {
  const api = (...a) => shell.api(...a);
  const [qF, q] = field("Message id, event id or idempotency key", { type: "search", value: initial || "" },
    "Finds the event in both directions: the inbound event, the message it became, its deliveries and their attempts.");
  const results = h("div", { "aria-live": "polite" });
  const go = h("button", { class: "primary", type: "submit" }, "Search");
  const form = h("form", { class: "stack", role: "search" }, qF, h("div", { class: "actions" }, go));
  const run = () => shell.guarded(async () => {
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

export async function brandingView(shell, body) {
  const api = (...a) => shell.api(...a);
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

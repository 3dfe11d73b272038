// portal_endpoints.js: the portal's endpoints: the list with each one's health,
// adding and editing one, and one endpoint's tabs and settings. A read-only link
// is shown no control that would change anything.
import { h, show, seg, qs, time, pretty, loading, empty, field, act, table, failure, copyButton, example } from "./dom.js";
import { overview, messages, testing } from "./portal_activity.js";
import { transformation } from "./transform.js";

// --- the list, each endpoint with its health --------------------------------------------------

/** A pill and a sentence for an endpoint's health (`hl` from `…/endpoint-health`). */
export function health(ep, hl) {
  const rate = hl && hl.recentAttempts ? `${hl.recentFailures} of the last ${hl.recentAttempts} attempts failed` : null;
  if (ep.disabled) {
    return [h("span", { class: "pill idle" }, "Disabled"),
      hl && hl.failingSince ? ["Turned off after failing since ", time(hl.failingSince), ". Fix it, then enable it in its settings."]
        : "Turned off: nothing is sent to it until it is enabled again."];
  }
  if (!hl) return [h("span", { class: "pill idle" }, "Enabled"), null];
  if (hl.failingSince) {
    return [h("span", { class: "pill bad" }, "Failing"),
      ["Failing since ", time(hl.failingSince), rate ? ` · ${rate}` : "",
        hl.nextAttempt ? [" · next retry ", time(hl.nextAttempt)] : ""]];
  }
  if (hl.recentFailures) return [h("span", { class: "pill warn" }, "Some failures"), rate];
  if (!hl.recentAttempts) return [h("span", { class: "pill idle" }, "No deliveries yet"), null];
  return [h("span", { class: "pill ok" }, "Healthy"), hl.lastSuccessAt ? ["Last delivered ", time(hl.lastSuccessAt)] : null];
}

export async function listView(ctx) {
  const { api, base, main } = ctx;
  const view = ctx.begin();
  ctx.sections("endpoints");
  show(main, h("h1", {}, "Endpoints"), loading("endpoints"));
  const [list, healths] = await Promise.all([api("GET", `${base}/endpoint?limit=250`), api("GET", `${base}/endpoint-health`)]);
  const byId = new Map(healths.data.map((x) => [x.endpointId, x]));
  const cards = list.data.map((ep) => {
    const hl = byId.get(ep.id);
    const [pill, detail] = health(ep, hl);
    return h("article", { class: "endpoint-card" },
      h("div", { class: "card-head" },
        h("button", { class: "link url", onclick: () => ctx.go.endpoint(ep.id, "overview") }, ep.url), pill),
      ep.description ? h("p", {}, ep.description) : null,
      detail ? h("p", { class: "muted" }, detail) : null,
      hl && hl.lastFailure && (hl.failingSince || ep.disabled) ? failure(hl.lastFailure.responseStatusCode, hl.lastFailure.response) : null,
      h("p", { class: "muted small" }, ep.eventTypes && ep.eventTypes.length ? `Events: ${ep.eventTypes.join(", ")}` : "All events"));
  });
  const add = ctx.readOnly ? null : h("button", { class: "primary", onclick: () => ctx.guarded(() => formView(ctx, null)) }, "Add endpoint");
  const dests = await destinationsList(ctx);
  if (!ctx.current(view)) return;
  show(main, h("h1", {}, "Endpoints"),
    h("p", { class: "muted" }, "Endpoints are the URLs we send your webhooks to."),
    add ? h("div", { class: "actions" }, add) : null,
    cards.length ? h("div", { class: "cards", role: "list", "aria-label": "Your endpoints" }, cards.map((c) => h("div", { role: "listitem" }, c)))
      : empty(ctx.readOnly ? "No endpoints yet." : "No endpoints yet. Add one to start receiving webhooks."),
    dests);
  main.focus();
}

// --- destinations (queues, tables, FIFO and polling endpoints: set up by the tenant) ---------

function destinationWhere(d) {
  const c = d.config || {};
  const where = c.uri || c.url || c.queueUrl || c.topicArn || c.eventBusName || (c.bucket && `s3://${c.bucket}`);
  return where || (d.type === "pollingEndpoint" ? "you read it through the poller API" : "—");
}

// The application's destinations beyond HTTP, read only, each with its recent attempts.
async function destinationsList(ctx) {
  const { api, base } = ctx;
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
      ctx.guarded(async () => {
        show(inner, loading("attempts"));
        const attempts = await api("GET", `${base}/attempt/endpoint/${seg(d.id)}${qs({ limit: 20 })}`);
        show(inner,
          d.failureReason ? h("p", {}, h("strong", {}, "Failing: "), d.failureReason) : null,
          attempts.data.length ? table(`Recent attempts to ${d.type}`, ["When", "Status", "Answer"],
            attempts.data.map((a) => [time(a.timestamp), a.status === 0 ? "Delivered" : "Failed", a.response]))
            : empty("No attempts yet."));
      });
    });
    return box;
  });
  return [h("h2", {}, "Destinations"),
    h("p", { class: "muted" }, `Other places ${ctx.owner} delivers your events to. They are set up through the API.`),
    items];
}

// --- add and edit -----------------------------------------------------------------------------

function eventPicker(ctx, selected) {
  const boxes = [];
  const items = ctx.catalog.map((et, i) => {
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

/** The content filter's field, and a try of it on a payload (the chosen event
 * type's example, editable), run by the server exactly as delivery runs it. */
function filterField(ctx, ep, picked) {
  const [filterF, filter] = field("Content filter", { type: "text", value: ep && ep.filter ? ep.filter : "", placeholder: "amount > 100 and currency == \"EUR\"", spellcheck: "false" },
    "Optional. Only messages whose payload passes it are sent. Empty sends every message of the chosen event types.");
  const [payloadF, payload] = field("Payload to try it on", { tag: "textarea", rows: 6, spellcheck: "false" });
  const out = h("div", { "aria-live": "polite" });
  const tryIt = h("button", { type: "button" }, "Try the filter");
  const fill = () => {
    if (payload.value.trim()) return;
    const et = ctx.catalog.find((x) => picked().includes(x.name)) || ctx.catalog[0];
    const ex = et ? example(et) : null;
    payload.value = ex ? pretty(ex) : "{}";
  };
  tryIt.addEventListener("click", () => {
    fill();
    let parsed;
    try { parsed = JSON.parse(payload.value); } catch (e) { show(out, h("p", { class: "error", role: "alert" }, `The payload is not JSON: ${e.message}`)); return; }
    act(tryIt, out, async () => {
      const r = await ctx.api("POST", `${ctx.base}/filter/try`, { filter: filter.value, payload: parsed });
      show(out, h("p", { class: r.matches ? "notice" : "muted", role: "status" }, r.matches ? "This payload passes: it would be sent." : "This payload does not pass: it would not be sent."));
    });
  });
  const tryBox = h("details", {}, h("summary", {}, "Try it on a payload"), payloadF, h("div", { class: "actions" }, tryIt), out);
  tryBox.addEventListener("toggle", fill);
  return [h("div", {}, filterF, tryBox), filter];
}

export async function formView(ctx, ep) {
  const { api, base, main } = ctx;
  const editing = !!ep;
  if (!editing) ctx.begin();
  const [urlF, url] = field("Endpoint URL", { type: "url", required: true, value: ep ? ep.url : "", placeholder: "https://example.com/webhooks" }, "Where we POST each event.");
  const [descF, desc] = field("Description", { type: "text", value: ep ? ep.description : "" });
  const [rateF, rate] = field("Rate limit (messages per second)", { type: "number", min: 1, value: ep && ep.throttleRate ? ep.throttleRate : "" }, "Optional. Empty means no limit.");
  const [picker, picked] = eventPicker(ctx, ep && ep.eventTypes ? ep.eventTypes : []);
  const [filterBox, filter] = filterField(ctx, ep, picked);
  const disabled = h("input", { type: "checkbox", id: "ep-disabled", checked: ep ? ep.disabled : false });
  const out = h("div", { "aria-live": "polite" });
  const save = h("button", { class: "primary", type: "submit" }, editing ? "Save changes" : "Create endpoint");
  const form = h("form", { class: "stack", novalidate: true }, urlF, descF, picker, filterBox, rateF,
    editing ? h("label", { class: "check", for: "ep-disabled" }, disabled, "Disabled (nothing is sent while disabled)") : null,
    h("div", { class: "actions" }, save,
      h("button", { type: "button", onclick: () => (editing ? ctx.go.endpoint(ep.id, "settings") : ctx.go.endpoints()) }, "Cancel")),
    out);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    if (!url.value.trim()) { show(out, h("p", { class: "error", role: "alert" }, "Enter the URL to send webhooks to.")); url.focus(); return; }
    const types = picked();
    const body = { url: url.value.trim(), description: desc.value, eventTypes: types.length ? types : null, throttleRate: rate.value ? Number(rate.value) : null, filter: filter.value.trim() || null };
    if (editing) body.disabled = disabled.checked;
    act(save, out, async () => {
      const saved = editing ? await api("PATCH", `${base}/endpoint/${seg(ep.id)}`, body) : await api("POST", `${base}/endpoint`, body);
      await endpointView(ctx, saved.id, editing ? "settings" : "overview", editing ? "Saved." : "Endpoint created.");
    });
  });
  if (!editing) show(main, h("button", { class: "link", onclick: () => ctx.go.endpoints() }, "← All endpoints"), h("h1", {}, "Add an endpoint"), form);
  return form;
}

// --- one endpoint -----------------------------------------------------------------------------

const TABS = [["overview", "Overview"], ["messages", "Messages"], ["testing", "Testing"], ["transformation", "Transformation"], ["settings", "Settings"]];
// The operator reading a tenant sees neither: a test sends, and a transformation's code may hold a credential.
const INSPECTED_TABS = TABS.filter(([k]) => k !== "testing" && k !== "transformation");

export async function endpointView(ctx, id, tab, notice) {
  const { api, base, main } = ctx;
  const view = ctx.begin();
  ctx.sections("endpoints");
  const [ep, healths] = await Promise.all([api("GET", `${base}/endpoint/${seg(id)}`), api("GET", `${base}/endpoint-health${qs({ endpoint_id: id })}`)]);
  if (!ctx.current(view)) return;
  const hl = healths.data.find((x) => x.endpointId === ep.id);
  const [pill, detail] = health(ep, hl);
  const body = h("div", { id: "tab-body", role: "tabpanel" });
  const tabs = h("div", { class: "tabs", role: "tablist", "aria-label": "Endpoint sections" },
    (ctx.inspecting ? INSPECTED_TABS : TABS).map(([k, label]) => h("button", { role: "tab", "aria-selected": String(k === tab), id: `tab-${k}`, "aria-controls": "tab-body",
      onclick: () => ctx.go.endpoint(id, k) }, label)));
  show(main, h("button", { class: "link", onclick: () => ctx.go.endpoints() }, "← All endpoints"),
    h("h1", { class: "url" }, ep.url),
    h("p", {}, pill, " ", ep.description || ""),
    detail ? h("p", { class: "muted" }, detail) : null,
    hl && hl.lastFailure && (hl.failingSince || ep.disabled) ? failure(hl.lastFailure.responseStatusCode, hl.lastFailure.response) : null,
    notice ? h("p", { class: "notice", role: "status" }, notice) : null,
    tabs, body);
  body.setAttribute("aria-labelledby", `tab-${tab}`);
  const views = { overview, messages, testing, settings, transformation: (c, e, b) => transformation(e, b, { api, base, catalog: c.catalog, example, readOnly: c.readOnly }) };
  await views[tab](ctx, ep, body);
}

async function settings(ctx, ep, body) {
  const { api, base } = ctx;
  const epBase = `${base}/endpoint/${seg(ep.id)}`;
  const hdr = await api("GET", `${epBase}/headers`);
  if (ctx.readOnly) {
    // What it is set to, and no control: the signing secret is not shown to a read-only link.
    const names = [...Object.keys(hdr.headers || {}), ...(hdr.sensitive || [])];
    show(body, h("h2", {}, "Endpoint"),
      table("Endpoint settings", ["Setting", "Value"], [
        ["URL", ep.url], ["Description", ep.description || "—"],
        ["Event types", ep.eventTypes && ep.eventTypes.length ? ep.eventTypes.join(", ") : "All events"],
        ["Rate limit", ep.throttleRate ? `${ep.throttleRate} per second` : "None"],
        ["Content filter", ep.filter || "None"],
        ["Custom headers", names.length ? names.join(", ") : "None"]]));
    return;
  }
  const form = await formView(ctx, ep);
  // The signing secret: shown only on request, rotated with a second click.
  const secretOut = h("div", { "aria-live": "polite" });
  const reveal = h("button", {}, "Reveal secret");
  reveal.addEventListener("click", () => act(reveal, secretOut, async () => {
    const s = await api("GET", `${epBase}/secret`);
    show(secretOut, h("p", { class: "actions" }, h("span", { class: "secret", id: "secret-value" }, s.key), copyButton("Copy secret", () => s.key)));
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
  const rows = h("div", {});
  const addRow = (k = "", v = "") => {
    const n = rows.children.length;
    const name = h("input", { type: "text", id: `h-name-${n}`, value: k, "aria-label": "Header name" });
    const value = h("input", { type: "text", id: `h-value-${n}`, value: v, "aria-label": `Value of header ${k || n + 1}` });
    const row = h("div", { class: "header-row" }, name, value, h("button", { type: "button", onclick: () => row.remove() }, "Remove"));
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
    yes.addEventListener("click", () => act(yes, dOut, async () => { await api("DELETE", epBase); await listView(ctx); }));
    show(dOut, h("span", {}, "It stops receiving webhooks at once. "), yes, h("button", { onclick: () => show(dOut) }, "Cancel"));
    yes.focus();
  });
  show(body, h("h2", {}, "Endpoint"), form,
    h("h2", {}, "Signing secret"), h("p", { class: "muted" }, "Use it to verify that webhooks come from us."),
    h("div", { class: "actions" }, reveal, rotate), confirmBox, secretOut,
    h("h2", {}, "Custom headers"), h("p", { class: "muted" }, "Sent with every webhook to this endpoint."), hForm,
    h("h2", {}, "Danger zone"), h("div", { class: "actions" }, del), dOut);
}

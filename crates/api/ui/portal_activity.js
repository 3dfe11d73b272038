// portal_activity.js: what one endpoint received: its overview (counts, the
// attempts chart, recovery), its messages with every attempt, and its test:
// an example payload to edit, sent to this endpoint only, its attempt shown here.
import { h, show, seg, qs, time, status, pretty, loading, empty, field, act, table, daysAgo, failure, example } from "./dom.js";
import { deliveryChart } from "./chart.js";

export async function overview(ctx, ep, body) {
  const { api, base } = ctx;
  const epBase = `${base}/endpoint/${seg(ep.id)}`;
  const chartBox = h("div", {}, loading("the delivery chart"));
  const range = (days) => ctx.guarded(async () => {
    const until = new Date();
    const since = new Date(until.getTime() - days * 86400e3);
    const stats = await api("GET", `${epBase}/stats/hourly${qs({ since: since.toISOString(), until: until.toISOString() })}`);
    show(chartBox, deliveryChart(stats.data, stats.since, stats.until, body.clientWidth));
  });
  const b24 = h("button", { onclick: () => { b24.setAttribute("aria-pressed", "true"); b7.setAttribute("aria-pressed", "false"); range(1); }, "aria-pressed": "true" }, "Last 24 hours");
  const b7 = h("button", { onclick: () => { b7.setAttribute("aria-pressed", "true"); b24.setAttribute("aria-pressed", "false"); range(7); }, "aria-pressed": "false" }, "Last 7 days");
  const counts = await api("GET", `${epBase}/stats${qs({ since: daysAgo(7) })}`);
  const card = (n, label) => h("div", { class: "card" }, h("div", { class: "n" }, String(n)), h("div", { class: "muted" }, label));
  let recover = null;
  if (!ctx.readOnly) {
    const [sinceF, since] = field("Recover failed messages since", { type: "datetime-local", required: true }, "Every message that failed since then is sent again.");
    const out = h("div", { "aria-live": "polite" });
    const go = h("button", { type: "submit" }, "Recover failed messages");
    const form = h("form", { class: "stack" }, sinceF, h("div", { class: "actions" }, go), out);
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      if (!since.value) { show(out, h("p", { class: "error", role: "alert" }, "Pick the date and time to recover from.")); return; }
      act(go, out, () => api("POST", `${epBase}/recover`, { since: new Date(since.value).toISOString() }), "Recovery started: failed messages since then are being sent again.");
    });
    recover = [h("h2", {}, "Recover"), form];
  }
  show(body,
    h("h2", {}, "Messages in the last 7 days"),
    h("p", { class: "muted small" }, "Each message counted once, by where it stands now."),
    h("div", { class: "grid" }, card(counts.success, "Delivered"), card(counts.fail, "Failed"), card(counts.pending + counts.sending, "Waiting")),
    h("h2", {}, "Delivery attempts per hour"),
    h("p", { class: "muted small" }, "Every attempt counted, retries included."),
    h("div", { class: "actions", role: "group", "aria-label": "Chart range" }, b24, b7),
    chartBox, recover);
  range(1);
}

const STATUS = [["", "Any status"], ["0", "Delivered"], ["2", "Failed"], ["1", "Pending"], ["3", "Sending"], ["4", "Canceled"]];

export async function messages(ctx, ep, body) {
  const { api, base, catalog } = ctx;
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
  let asked = 0;
  const load = () => ctx.guarded(async () => {
    const mine = ++asked;
    show(list, loading("messages"));
    const page = await api("GET", `${epBase}/msg${qs({
      limit: 50, status: statusSel.value, event_types: typeSel.value,
      after: sinceIn.value ? new Date(sinceIn.value).toISOString() : "", with_content: "true",
    })}`);
    if (mine !== asked) return;
    if (!page.data.length) { show(list, empty("No messages match. Messages appear here once they are sent to this endpoint.")); return; }
    show(list, page.data.map((m) => messageRow(ctx, m, ep)));
  });
  filters.addEventListener("submit", (ev) => { ev.preventDefault(); load(); });
  show(body, filters, list);
  load();
}

/** One message, opening to its payload and its attempts (to `ep`, or to every
 * endpoint it went to when `ep` is null), with a resend where allowed. */
export function messageRow(ctx, m, ep) {
  const { api, base } = ctx;
  const attemptsBox = h("div", {});
  const out = h("div", { "aria-live": "polite" });
  let resend = null;
  if (ep && !ctx.readOnly) {
    resend = h("button", {}, "Resend");
    resend.addEventListener("click", () => act(resend, out,
      () => api("POST", `${base}/msg/${seg(m.id)}/endpoint/${seg(ep.id)}/resend`), "Resend scheduled: it goes out in a moment."));
  }
  const details = h("details", { class: "message" },
    h("summary", {}, m.statusText ? status(m.statusText) : null, " ", h("code", {}, m.eventType), " · ", time(m.timestamp), " · ", h("span", { class: "muted wrap" }, m.id)),
    m.eventId ? h("p", { class: "muted small" }, `Event id: ${m.eventId}`) : null,
    resend ? h("div", { class: "actions" }, resend) : null, out,
    h("h3", {}, "Payload"), h("pre", {}, pretty(m.payload)),
    h("h3", {}, ep ? "Attempts" : "Deliveries"), attemptsBox);
  details.addEventListener("toggle", () => {
    if (!details.open || attemptsBox.dataset.loaded) return;
    attemptsBox.dataset.loaded = "1";
    ctx.guarded(async () => {
      show(attemptsBox, loading("attempts"));
      if (ep) {
        const page = await api("GET", `${base}/attempt/msg/${seg(m.id)}${qs({ endpoint_id: ep.id, limit: 50 })}`);
        show(attemptsBox, page.data.length ? page.data.map(attemptBox) : empty("No attempt yet: it is on its way."));
        return;
      }
      const [dests, attempts] = await Promise.all([
        api("GET", `${base}/msg/${seg(m.id)}/endpoint?limit=50`),
        api("GET", `${base}/attempt/msg/${seg(m.id)}${qs({ limit: 50 })}`)]);
      if (!dests.data.length) { show(attemptsBox, empty("It matched no endpoint: nothing was sent.")); return; }
      show(attemptsBox, dests.data.map((d) => h("section", { class: "delivery" },
        h("p", {}, status(d.statusText || ["success", "pending", "fail", "sending"][d.status] || "pending"), " ", h("span", { class: "wrap" }, d.url),
          d.nextAttempt ? [" · next attempt ", time(d.nextAttempt)] : ""),
        attempts.data.filter((a) => a.endpointId === d.id).map(attemptBox))));
    });
  });
  return details;
}

export function attemptBox(a) {
  const headers = a.requestHeaders ? Object.entries(a.requestHeaders) : [];
  const ok = a.status === 0;
  return h("div", { class: "chain attempt" },
    h("p", {}, status(a.statusText), " ", h("strong", {}, a.responseStatusCode ? `HTTP ${a.responseStatusCode}` : "No response"),
      ` · ${a.responseDurationMs} ms · `, time(a.timestamp), a.triggerType === 1 ? " · manual" : ""),
    h("p", { class: "muted wrap" }, `To ${a.url}`),
    ok ? null : failure(a.responseStatusCode, a.responseStatusCode ? "" : a.response),
    h("h3", {}, "Response body"), h("pre", { class: "response" }, a.response ? pretty(a.response) : "(empty)"),
    headers.length ? [h("h3", {}, "Request headers"), table("Request headers", ["Header", "Value"], headers.map(([k, v]) => [h("code", {}, k), v]))] : null);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function testing(ctx, ep, body) {
  const { api, base, catalog } = ctx;
  if (ctx.readOnly) {
    show(body, h("p", { class: "muted" }, "A read-only link cannot send test events."));
    return;
  }
  if (ep.disabled) {
    show(body, h("p", { class: "warning" }, "This endpoint is disabled: enable it in its settings to send it a test event."));
    return;
  }
  const payloadOf = (name) => {
    const et = catalog.find((x) => x.name === name);
    return (et && example(et)) || { success: true };
  };
  const sel = h("select", { id: "t-type" }, h("option", { value: "svix.ping" }, "svix.ping (a ping)"), catalog.map((et) => h("option", { value: et.name }, et.name)));
  const [payloadF, payload] = field("Payload", { tag: "textarea", rows: 10, spellcheck: "false", class: "code" },
    "The event type's example: change it as you like (a JSON object).");
  payload.value = pretty(payloadOf(sel.value));
  sel.addEventListener("change", () => { payload.value = pretty(payloadOf(sel.value)); });
  const out = h("div", { "aria-live": "polite" });
  const send = h("button", { class: "primary", type: "submit" }, "Send test event");
  const form = h("form", { class: "stack" },
    h("div", {}, h("label", { for: "t-type" }, "Event type"), h("p", { class: "hint" }, "Sent to this endpoint only."), sel),
    payloadF, h("div", { class: "actions" }, send), out);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    let parsed;
    try { parsed = JSON.parse(payload.value); } catch (e) { parsed = undefined; }
    if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
      show(out, h("p", { class: "error", role: "alert" }, "The payload must be a JSON object, such as {\"id\": 1}."));
      return;
    }
    act(send, out, async () => {
      const m = await api("POST", `${base}/endpoint/${seg(ep.id)}/send-example`, { eventType: sel.value, payload: parsed });
      const waiting = h("p", { class: "loading", role: "status" }, `Test event sent (${m.id}). Waiting for its attempt…`);
      show(out, waiting);
      for (let i = 0; i < 30; i += 1) {
        const page = await api("GET", `${base}/attempt/msg/${seg(m.id)}${qs({ endpoint_id: ep.id, limit: 1 })}`);
        if (page.data.length) {
          show(out, h("p", { class: "notice", role: "status" }, `Test event sent (${m.id}).`), attemptBox(page.data[0]));
          return;
        }
        await sleep(700);
      }
      show(out, h("p", { class: "notice", role: "status" }, `Test event sent (${m.id}). Its attempt has not come yet: it shows under Messages when it does.`));
    });
  });
  show(body, form);
}

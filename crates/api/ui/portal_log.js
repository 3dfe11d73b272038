// portal_log.js: the application's message log: every message, newest first,
// page by page in both directions, filtered by event type, channel and dates, or
// found by its id or its eventId; each opens to where it went and every attempt.
import { h, show, seg, qs, loading, empty, ApiError, errorBox } from "./dom.js";
import { messageRow } from "./portal_activity.js";

const PAGE = 25;

export async function logView(ctx) {
  const { api, base, main, catalog } = ctx;
  ctx.begin();
  ctx.sections("log");
  const searchIn = h("input", { type: "search", id: "l-search", placeholder: "msg_… or your event id" });
  const search = h("form", { class: "actions", role: "search", "aria-label": "Find a message" },
    h("div", { class: "grow" }, h("label", { for: "l-search" }, "Message id or event id"), searchIn),
    h("div", {}, h("span", { class: "sr-only" }, "Find"), h("button", { type: "submit" }, "Find")));
  const typeSel = h("select", { id: "l-type" }, h("option", { value: "" }, "Any event type"), catalog.map((et) => h("option", { value: et.name }, et.name)));
  const channelIn = h("input", { type: "text", id: "l-channel", placeholder: "any" });
  // A message's state is its deliveries': one that failed to any endpoint shows under "Failed".
  const statusSel = h("select", { id: "l-status" }, [["", "Any status"], ["0", "Delivered"], ["1", "Waiting or retrying"], ["2", "Failed"]]
    .map(([v, label]) => h("option", { value: v }, label)));
  const afterIn = h("input", { type: "datetime-local", id: "l-after" });
  const beforeIn = h("input", { type: "datetime-local", id: "l-before" });
  const filters = h("form", { class: "actions filters", role: "search", "aria-label": "Filter messages" },
    h("div", {}, h("label", { for: "l-type" }, "Event type"), typeSel),
    h("div", {}, h("label", { for: "l-status" }, "Status"), statusSel),
    h("div", {}, h("label", { for: "l-channel" }, "Channel"), channelIn),
    h("div", {}, h("label", { for: "l-after" }, "From"), afterIn),
    h("div", {}, h("label", { for: "l-before" }, "Until"), beforeIn),
    h("div", {}, h("span", { class: "sr-only" }, "Apply"), h("button", { type: "submit" }, "Filter")));
  const list = h("div", { "aria-live": "polite" });
  const pager = h("div", { class: "actions pager" });
  let depth = 0;
  // The last load asked for wins: an older answer arriving late is dropped.
  let asked = 0;

  const iso = (el) => (el.value ? new Date(el.value).toISOString() : "");
  // `back`: this page was reached going newer, so older ones exist whatever `done` says
  // (`done` speaks of the direction a page was read in).
  const load = (iterator, back) => ctx.guarded(async () => {
    const mine = ++asked;
    show(list, loading("messages"));
    show(pager);
    const page = await api("GET", `${base}/msg${qs({
      limit: PAGE, iterator, event_types: typeSel.value, status: statusSel.value, channel: channelIn.value.trim(),
      after: iso(afterIn), before: iso(beforeIn), with_content: "true",
    })}`);
    if (mine !== asked) return;
    if (!page.data.length) {
      show(list, empty(depth ? "No more messages this way." : "No messages match."));
    } else {
      show(list, h("p", { class: "muted small" }, "Newest first. Open a message to see where it went and every attempt."),
        page.data.map((m) => messageRow(ctx, m, null)));
    }
    const newer = depth > 0 && page.prevIterator ? h("button", { onclick: () => { depth -= 1; load(page.prevIterator, true); } }, "← Newer") : null;
    const older = (back || !page.done) && page.iterator ? h("button", { onclick: () => { depth += 1; load(page.iterator); } }, "Older →") : null;
    show(pager, newer, older);
  });
  filters.addEventListener("submit", (ev) => { ev.preventDefault(); depth = 0; load(""); });
  search.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = searchIn.value.trim();
    if (!q) { depth = 0; load(""); return; }
    const mine = ++asked;
    show(pager);
    // Ids and eventIds are made of these: anything else names no message.
    if (!/^[A-Za-z0-9_.-]{1,256}$/.test(q)) { show(list, empty(`No message has the id or event id “${q}”.`)); return; }
    show(list, loading("the message"));
    api("GET", `${base}/msg/${seg(q)}${qs({ with_content: "true" })}`).then((m) => {
      if (mine !== asked) return;
      const row = messageRow(ctx, m, null);
      row.open = true;
      show(list, row);
    }, (e) => {
      if (ctx.expired(e) || mine !== asked) return;
      show(list, e instanceof ApiError && e.status === 404 ? empty(`No message has the id or event id “${q}”.`) : errorBox(e));
    });
  });
  show(main, h("h1", {}, "Messages"),
    h("p", { class: "muted" }, "Every event sent to you, whichever endpoint it went to."),
    search, filters, list, pager);
  load("");
}

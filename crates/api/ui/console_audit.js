// console_audit.js: a tenant's audit log, newest first, page by page both ways:
// who changed what and when (the operator's reads of the tenant's data too).
import { h, show, qs, time, loading, empty, table } from "./dom.js";

const PAGE = 50;

/** Who acted, in words: the operator, an API key (by its label where it has one), a link. */
function actor(e) {
  const [kind, id] = e.actor.split(/:(.*)/s);
  if (kind === "operator") return "The operator";
  if (kind === "key") return e.actorLabel ? [`API key “${e.actorLabel}” `, h("code", { class: "muted" }, id)] : ["API key ", h("code", {}, id)];
  if (kind === "portal") return ["Portal link of ", h("code", {}, id)];
  if (kind === "message-token") return ["Message token of ", h("code", {}, id)];
  if (kind === "poller") return ["Poller token of ", h("code", {}, id)];
  return e.actor;
}

/** Draws the log read from `path` into `into`. */
export function auditLog(shell, into, path) {
  const list = h("div", { "aria-live": "polite" });
  const pager = h("div", { class: "actions pager" });
  let depth = 0;
  let asked = 0;
  const load = (iterator, back) => shell.guarded(async () => {
    const mine = ++asked;
    show(list, loading("the audit log"));
    show(pager);
    const page = await shell.api("GET", `${path}${qs({ limit: PAGE, iterator })}`);
    if (mine !== asked) return;
    show(list, page.data.length
      ? table("Audit log", ["When", "Who", "What", "Answer"], page.data.map((e) => [
        time(e.createdAt), actor(e),
        h("span", {}, h("strong", {}, e.method), " ", h("code", { class: "any" }, e.path)),
        String(e.statusCode)]))
      : empty(depth ? "Nothing more this way." : "Nothing recorded yet."));
    const newer = depth > 0 && page.prevIterator ? h("button", { onclick: () => { depth -= 1; load(page.prevIterator, true); } }, "← Newer") : null;
    const older = (back || !page.done) && page.iterator ? h("button", { onclick: () => { depth += 1; load(page.iterator); } }, "Older →") : null;
    show(pager, newer, older);
  }, list);
  show(into, h("h2", {}, "Audit log"),
    h("p", { class: "muted" }, "What the operator and the tenant changed, and what the operator looked at, newest first. Kept as long as the tenant's messages."),
    list, pager);
  load("");
}

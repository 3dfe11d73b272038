// dom.js: what both pages share. Every element is built with the DOM API and
// every string goes in as a text node or an attribute value, never as markup:
// names, payloads, response bodies and headers cannot become HTML. (The tidy
// test refuses innerHTML, outerHTML, insertAdjacentHTML, document.write and eval
// anywhere in the UI.)

const SVG = "http://www.w3.org/2000/svg";

function build(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "value" && "value" in el) el.value = v;
    else if (k === "checked") el.checked = !!v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** An HTML element: h("button", {class: "primary", onclick}, "Save"). */
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/** An SVG element, for the chart. */
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG, tag), attrs, children);
}

/** Replaces what `el` shows. */
export function show(el, ...children) {
  el.replaceChildren();
  build(el, {}, children);
}

/** An error from the API, with words a person can act on. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function words(status, body) {
  let detail = body && body.detail;
  if (Array.isArray(detail)) detail = detail.map((d) => d.msg || JSON.stringify(d)).join("; ");
  switch (true) {
    case status === 0: return "The server could not be reached. Check your connection and try again.";
    case status === 401: return "Your access is invalid or has expired. Ask for a new link, or sign in again.";
    case status === 403: return detail && /read-only/.test(detail) ? "This link is read-only: it shows, but cannot change anything." : "This access does not allow that.";
    case status === 404: return "Not found: it may have been deleted.";
    case status === 409: return detail ? `Not done: ${detail}` : "Not done: it conflicts with something that exists.";
    case status === 413: return "That is too large.";
    case status === 422 || status === 400: return detail ? `Please check the form: ${detail}` : "Please check the form.";
    case status === 429: return "Too many requests. Wait a moment and try again.";
    default: return "Something went wrong on the server. Try again in a moment.";
  }
}

/** Calls the API with the credential in the Authorization header: never in a
 * URL, never in a cookie. Resolves to the JSON body (or null). */
export function client(token, extra = {}) {
  return async function call(method, path, body) {
    let res;
    try {
      res = await fetch(path, {
        method,
        headers: {
          Authorization: `Bearer ${token}`,
          ...extra,
          ...(body === undefined ? {} : { "Content-Type": "application/json" }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: "omit",
        cache: "no-store",
      });
    } catch (_) {
      throw new ApiError(0, words(0));
    }
    const text = await res.text();
    let json = null;
    try { json = text ? JSON.parse(text) : null; } catch (_) { json = null; }
    if (!res.ok) throw new ApiError(res.status, words(res.status, json));
    return json;
  };
}

/** A path segment, escaped: ids come from the API, but never trust them in a URL. */
export const seg = (v) => encodeURIComponent(String(v));

/** A query string from an object, skipping empty values. */
export function qs(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") q.set(k, v);
  const t = q.toString();
  return t ? `?${t}` : "";
}

const when = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });

/** A timestamp in the viewer's own time zone. */
export function time(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  return h("time", { datetime: d.toISOString(), title: d.toISOString() }, when.format(d));
}

/** A delivery status as a pill. */
export function status(text) {
  const kind = { success: "ok", fail: "bad", failed: "bad", pending: "warn", sending: "warn" }[text] || "idle";
  const label = { success: "Delivered", fail: "Failed", failed: "Failed", pending: "Pending", sending: "Sending", canceled: "Canceled" }[text] || text;
  return h("span", { class: `pill ${kind}` }, label);
}

/** Pretty JSON when it is JSON, else the text itself. */
export function pretty(v) {
  if (typeof v === "string") {
    try { return JSON.stringify(JSON.parse(v), null, 2); } catch (_) { return v; }
  }
  return JSON.stringify(v, null, 2);
}

/** An error box, announced to screen readers. */
export function errorBox(e) {
  return h("p", { class: "error", role: "alert" }, e instanceof ApiError ? e.message : `Something went wrong: ${e.message || e}`);
}

export const loading = (what) => h("p", { class: "loading", role: "status" }, `Loading ${what}…`);
export const empty = (text) => h("p", { class: "empty" }, text);

/** A labelled input; returns [wrapper, input]. */
export function field(label, attrs, hint) {
  const id = attrs.id || `f-${Math.random().toString(36).slice(2, 9)}`;
  const input = h(attrs.tag || "input", { ...attrs, tag: null, id, "aria-describedby": hint ? `${id}-hint` : null });
  return [h("div", {}, h("label", { for: id }, label), hint ? h("p", { class: "hint", id: `${id}-hint` }, hint) : null, input), input];
}

/** A table with a header row; rows are arrays of cells. Its wrapper scrolls
 * sideways when the table is wider than the screen, so it is a named region a
 * keyboard can reach and scroll. */
export function table(caption, headers, rows) {
  return h("div", { class: "table-wrap", role: "region", "aria-label": caption, tabindex: "0" },
    h("table", {},
      h("caption", { class: "sr-only" }, caption),
      h("thead", {}, h("tr", {}, headers.map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c) => (c instanceof Node && c.tagName === "TD" ? c : h("td", { class: "wrap" }, c))))))));
}

/** Runs an action from a button: disables it meanwhile, shows the outcome in `out`. */
export async function act(button, out, work, done) {
  button.disabled = true;
  try {
    const result = await work();
    if (done) show(out, h("p", { class: "notice", role: "status" }, done));
    return result;
  } catch (e) {
    show(out, errorBox(e));
    return undefined;
  } finally {
    button.disabled = false;
  }
}

/** A credential kept for this tab only: sessionStorage, not a cookie, so it
 * never travels with a request the page did not make itself. */
export const session = {
  get: (k) => sessionStorage.getItem(k),
  set: (k, v) => sessionStorage.setItem(k, v),
  drop: (k) => sessionStorage.removeItem(k),
};

/** A queue that runs at most `n` tasks at once: a page of rows asks the server a
 * few questions at a time, not one per row all at once (the database's
 * connections are shared by every tenant). */
export function limiter(n) {
  let running = 0;
  const waiting = [];
  const next = () => {
    if (running >= n || !waiting.length) return;
    running += 1;
    const [task, ok, fail] = waiting.shift();
    task().then(ok, fail).finally(() => { running -= 1; next(); });
  };
  return (task) => new Promise((ok, fail) => { waiting.push([task, ok, fail]); next(); });
}

/** An ISO timestamp `days` ago: the window of the counts a page shows. */
export function daysAgo(days) {
  return new Date(Date.now() - days * 86400e3).toISOString();
}

/** What a failed attempt means, in words a customer can act on; the raw text
 * stays one click away (`failure`). `code` is the HTTP status (0: no answer). */
export function explain(code, text) {
  const t = String(text || "");
  if (code >= 500) return `Your endpoint answered with a server error (HTTP ${code}).`;
  if (code === 429) return "Your endpoint asked us to slow down (HTTP 429); we retry later.";
  if (code >= 400) return `Your endpoint refused the webhook (HTTP ${code}). Check its address and what it expects.`;
  if (code >= 300) return `Your endpoint answered with a redirect (HTTP ${code}); webhooks do not follow redirects.`;
  if (/refused/i.test(t)) return "Your endpoint refused the connection: nothing is listening at that address and port.";
  if (/dns|lookup|resolve|name or service|no such host|nodename/i.test(t)) return "Your endpoint's host name could not be found (DNS).";
  if (/certificate|tls|ssl|handshake/i.test(t)) return "A secure connection could not be made: check your endpoint's TLS certificate.";
  if (/timed? ?out|timeout|deadline/i.test(t)) return "Your endpoint did not answer in time.";
  if (/reset|broken pipe|closed|eof/i.test(t)) return "The connection to your endpoint was cut before it answered.";
  if (/not allowed|blocked|private|reserved|forbidden address/i.test(t)) return "We do not send to that address (a private or reserved network).";
  return "The webhook could not be delivered.";
}

/** A failed attempt: its meaning, and the raw text behind a disclosure. */
export function failure(code, text) {
  return h("div", { class: "failure" },
    h("p", {}, explain(code, text)),
    text ? h("details", { class: "raw" }, h("summary", {}, "Show the technical details"), h("pre", {}, String(text))) : null);
}

/** A button that copies `text()` to the clipboard, saying so where it stands. */
export function copyButton(label, text) {
  const b = h("button", { type: "button", class: "copy" }, label);
  b.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text());
      b.textContent = "Copied";
    } catch (_) {
      b.textContent = "Select and copy it";
    }
    setTimeout(() => { b.textContent = label; }, 2000);
  });
  return b;
}

/** An event type's newest schema version: [version, schema], or null. */
export function newestSchema(et) {
  const versions = et.schemas && typeof et.schemas === "object" ? Object.entries(et.schemas) : [];
  versions.sort((a, b) => Number(b[0]) - Number(a[0]));
  return versions[0] || null;
}

/** An event type's example payload (the newest schema version with one), or null. */
export function example(et) {
  const versions = et.schemas && typeof et.schemas === "object" ? Object.entries(et.schemas) : [];
  versions.sort((a, b) => Number(b[0]) - Number(a[0]));
  for (const [, v] of versions) {
    const ex = (v && Array.isArray(v.examples) && v.examples[0]) || (v && v.example);
    if (ex) return ex;
  }
  return null;
}

/** Asks before an action that is hard to undo: a modal dialog naming what will
 * happen; resolves true only if the person chose `confirm`. */
export function confirmDialog({ title, text, confirm }) {
  return new Promise((resolve) => {
    const yes = h("button", { class: "danger", value: "yes" }, confirm);
    const no = h("button", { value: "no", autofocus: true }, "Cancel");
    const dialog = h("dialog", { class: "confirm", "aria-labelledby": "confirm-title", "aria-describedby": "confirm-text" },
      h("form", { method: "dialog", class: "stack" },
        h("h2", { id: "confirm-title" }, title), h("p", { id: "confirm-text" }, text),
        h("div", { class: "actions" }, no, yes)));
    dialog.addEventListener("close", () => { dialog.remove(); resolve(dialog.returnValue === "yes"); });
    document.body.append(dialog);
    dialog.showModal();
  });
}

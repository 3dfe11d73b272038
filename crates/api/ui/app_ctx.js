// app_ctx.js: what the views of one application (its endpoints, message log and
// event catalog) are given, in the customer's portal and in the console alike:
// the API client, the application's base path, whether only reading is allowed,
// and the ways to move between views without an older view showing over a newer.
import { h, show, seg, errorBox } from "./dom.js";
import { listView, endpointView } from "./portal_endpoints.js";
import { logView } from "./portal_log.js";
import { catalogView } from "./portal_catalog.js";

/** A context for `appId`'s views drawn into `main`. `expired(e)` says (and shows)
 * when an error ends the session; `sections(current)` draws the section links. */
export function appContext(main, { appId, owner, expired, sections }) {
  const ctx = {
    main,
    owner,
    api: null,
    base: `/api/v1/app/${seg(appId)}`,
    catalog: [],
    readOnly: false,
    // The operator reading a tenant: read only, and fewer tabs (`portal_endpoints.js`).
    inspecting: false,
    // Which view was asked for last: a view that finishes loading after another
    // was asked for does not show itself over it (`ctx.current(view)`).
    seq: 0,
    begin() { ctx.seq += 1; return ctx.seq; },
    current(view) { return view === ctx.seq; },
    gen: 0,
    expired,
    sections: sections || (() => {}),
    // Runs a view's work; its error shows only while that view is still the one
    // asked for. A view begins (`ctx.begin`) before its first wait, so the view
    // is known once `fn` has been called.
    async guarded(fn) {
      let view = ctx.seq;
      try {
        const work = fn();
        view = ctx.seq;
        await work;
      } catch (e) {
        if (!ctx.expired(e) && ctx.current(view)) show(main, errorBox(e));
      }
    },
    go: {
      endpoints: () => ctx.guarded(() => listView(ctx)),
      endpoint: (id, tab, notice) => ctx.guarded(() => endpointView(ctx, id, tab, notice)),
      log: (query) => ctx.guarded(() => logView(ctx, query)),
      catalog: () => ctx.guarded(() => catalogView(ctx)),
    },
  };
  return ctx;
}

/** The section links of an application's views; `extra` goes before them. */
export function sectionNav(ctx, label, extra) {
  const nav = h("nav", { class: "sections", "aria-label": label });
  return {
    nav,
    draw(current) {
      show(nav, extra || null, [["endpoints", "Endpoints"], ["log", "Messages"], ["catalog", "Event catalog"]].map(([k, text]) =>
        h("button", { class: "link", "aria-current": k === current ? "page" : null, onclick: () => ctx.go[k]() }, text)));
    },
  };
}

// portal_catalog.js: the event catalog: every event type the customer may
// receive, grouped by the part of its name before the first dot, searchable, each
// with its description, its schema and an example payload.
import { h, show, pretty, empty, example, newestSchema } from "./dom.js";

const group = (name) => (name.includes(".") ? name.slice(0, name.indexOf(".")) : "other");

export async function catalogView(ctx) {
  const { main, catalog } = ctx;
  ctx.begin();
  ctx.sections("catalog");
  const searchIn = h("input", { type: "search", id: "c-search", placeholder: "order, invoice.paid, …" });
  const list = h("div", { "aria-live": "polite" });
  const render = () => {
    const q = searchIn.value.trim().toLowerCase();
    const found = catalog.filter((et) => !q || et.name.toLowerCase().includes(q) || (et.description || "").toLowerCase().includes(q));
    if (!found.length) { show(list, empty(catalog.length ? "No event type matches." : "No event types are published yet.")); return; }
    const groups = new Map();
    for (const et of found) {
      const g = group(et.name);
      if (!groups.has(g)) groups.set(g, []);
      groups.get(g).push(et);
    }
    show(list, [...groups.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([g, types]) =>
      h("section", { class: "catalog-group", "aria-label": g },
        h("h2", {}, g, h("span", { class: "muted small" }, ` · ${types.length}`)),
        types.sort((a, b) => a.name.localeCompare(b.name)).map(eventType))));
  };
  searchIn.addEventListener("input", render);
  show(main, h("h1", {}, "Event catalog"),
    h("p", { class: "muted" }, "The events you can subscribe an endpoint to."),
    h("div", { class: "grow" }, h("label", { for: "c-search" }, "Search event types"), searchIn),
    list);
  render();
}

function eventType(et) {
  const ex = example(et);
  const schema = newestSchema(et);
  return h("article", { class: "event-type" },
    h("h3", {}, h("code", {}, et.name)),
    h("p", {}, et.description || h("span", { class: "muted" }, "No description.")),
    ex ? h("details", {}, h("summary", {}, `Example payload of ${et.name}`), h("pre", {}, pretty(ex))) : null,
    schema ? h("details", {}, h("summary", {}, `Schema of ${et.name} (version ${schema[0]})`), h("pre", {}, pretty(schema[1]))) : null);
}

// chart.js: the delivery chart, successes and failures per hour, drawn as SVG
// elements (no chart library; nothing parsed as markup).
import { h, s } from "./dom.js";

const HOUR = 3600 * 1000;

/** `data`: [{hour, success, fail}] from the hourly stats; `since`/`until`: ISO;
 * `width`: the pixels it is shown in, so its text is drawn at its own size (a
 * drawing scaled down to a phone's width would shrink its labels to nothing). */
export function deliveryChart(data, since, until, width) {
  const start = Math.floor(new Date(since).getTime() / HOUR) * HOUR;
  const end = new Date(until).getTime();
  const hours = Math.max(1, Math.ceil((end - start) / HOUR));
  const buckets = Array.from({ length: hours }, (_, i) => ({ at: start + i * HOUR, success: 0, fail: 0 }));
  for (const d of data) {
    const i = Math.floor((new Date(d.hour).getTime() - start) / HOUR);
    if (i >= 0 && i < hours) { buckets[i].success += d.success; buckets[i].fail += d.fail; }
  }
  const max = Math.max(1, ...buckets.map((b) => b.success + b.fail));
  const total = buckets.reduce((a, b) => ({ success: a.success + b.success, fail: a.fail + b.fail }), { success: 0, fail: 0 });
  const W = Math.max(280, Math.min(1100, Math.round(width || 720))), H = 210, top = 24, bottom = 24, left = 44;
  const plot = H - top - bottom;
  const bw = (W - left) / hours;
  const bars = buckets.flatMap((b, i) => {
    const x = left + i * bw + (bw > 4 ? 1 : 0);
    const w = Math.max(1, bw - (bw > 4 ? 2 : 0));
    const hs = (b.success / max) * plot, hf = (b.fail / max) * plot;
    const label = `${new Date(b.at).toLocaleString(undefined, { dateStyle: "short", timeStyle: "short" })}: ${b.success} attempts delivered, ${b.fail} failed`;
    return [
      s("rect", { class: "ok", x, y: top + plot - hs, width: w, height: hs }, s("title", {}, label)),
      s("rect", { class: "bad", x, y: top + plot - hs - hf, width: w, height: hf }, s("title", {}, label)),
    ];
  });
  const day = hours <= 25;
  // Fewer labels where there is less room: one every 6 hours (12 on a phone), or every day (2).
  const narrow = W < 500;
  const every = day ? (narrow ? 12 : 6) : (narrow ? 48 : 24);
  const ticks = buckets
    .map((b, i) => ({ b, i }))
    .filter(({ b }) => new Date(b.at).getHours() % every === 0)
    // A label too close to the right edge ends there instead of running past it
    // (which scrolled a phone's page sideways when the hour it marks was recent).
    .map(({ b, i }) => s("text", left + i * bw > W - 48 ? { x: W, y: H - 6, "text-anchor": "end" } : { x: left + i * bw, y: H - 6 },
      !day ? new Date(b.at).toLocaleDateString(undefined, { month: "short", day: "numeric" })
        : new Date(b.at).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" })));
  const summary = `${day ? "Last 24 hours" : `Last ${Math.round(hours / 24)} days`}: ${total.success} attempts delivered, ${total.fail} failed`;
  return h("figure", { class: "chart" },
    s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": summary },
      s("line", { class: "axis", x1: left, y1: top + plot, x2: W, y2: top + plot }),
      yTicks(max).map((v) => {
        const y = top + plot - (v / max) * plot;
        return [s("line", { class: "grid-line", x1: left, y1: y, x2: W, y2: y }),
          s("text", { x: left - 6, y: y + 4, "text-anchor": "end" }, String(v))];
      }),
      s("text", { x: 0, y: 12, class: "unit" }, "attempts"),
      bars, ticks),
    h("figcaption", { class: "legend" },
      h("span", {}, h("span", { class: "swatch ok" }), `Attempts delivered (${total.success})`),
      h("span", {}, h("span", { class: "swatch bad" }), `Attempts failed (${total.fail})`)));
}

/** Whole-number ticks for an axis from 0 to `max`: 0, the middle and the top. */
function yTicks(max) {
  const mid = Math.round(max / 2);
  return [...new Set([0, mid, max])].filter((v) => v >= 0 && v <= max);
}

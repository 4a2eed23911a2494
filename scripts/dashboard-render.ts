/**
 * Draws docs/grafana-dashboard.json's panels as one HTML page, from the series its queries
 * returned: laid out by each panel's gridPos (24 columns), time series as SVG lines (stacked and
 * filled where the panel says so) over a legend table of the panel's calcs, rows as headings.
 * It draws what Grafana would show, not how Grafana draws it. Pure: no I/O.
 */

export interface Target {
  expr: string;
  legendFormat?: string;
  refId?: string;
}

export interface Panel {
  type: string;
  id: number;
  title: string;
  gridPos: { h: number; w: number; x: number; y: number };
  fieldConfig?: { defaults?: { unit?: string; min?: number; custom?: { fillOpacity?: number; stacking?: { mode?: string } } } };
  options?: { legend?: { calcs?: string[] } };
  targets?: Target[];
  panels?: Panel[];
}

export interface Dashboard {
  title: string;
  panels: Panel[];
}

/** One series a panel's query returned: its legend and a value per step (NaN where it had none). */
export interface Series {
  legend: string;
  values: number[];
}

/** The run the series cover: step i is at `startS + i * stepS` (Unix seconds). */
export interface Range {
  startS: number;
  stepS: number;
  steps: number;
}

/** Grafana's classic palette, in its order. */
const COLORS = ["#73BF69", "#F2CC0C", "#8AB8FF", "#FF780A", "#F2495C", "#5794F2", "#B877D9", "#705DA0", "#37872D", "#FADE2A", "#447EBC", "#C15C17"];
const WIDTH_PX = 1600;
const PAGE_PADDING_PX = 12;
const CELL_H_PX = 44;
const GAP_PX = 8;
const LEGEND_ROW_PX = 15;

/** `{{label}}` in a legendFormat replaced by the series' labels, as Grafana does; without one, the series' labels. */
export function legendOf(format: string | undefined, labels: Record<string, string>): string {
  if (format === undefined || format === "" || format === "__auto") {
    const pairs = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
    return pairs.length > 0 ? `{${pairs.join(", ")}}` : "value";
  }
  return format.replace(/\{\{\s*(\w+)\s*\}\}/g, (_, name: string) => labels[name] ?? "").trim();
}

function significant(n: number): string {
  if (n === 0) return "0";
  const abs = Math.abs(n);
  return abs >= 100 ? n.toFixed(0) : abs >= 10 ? n.toFixed(1).replace(/\.0$/, "") : Number(n.toPrecision(3)).toString();
}

function scaled(value: number, base: number, suffixes: string[]): string {
  let i = 0;
  while (Math.abs(value) >= base && i < suffixes.length - 1) {
    value /= base;
    i++;
  }
  return `${significant(value)}${suffixes[i]}`;
}

/** A value in the panel's unit, as Grafana's unit names mean it. */
export function formatValue(value: number, unit: string | undefined): string {
  if (!Number.isFinite(value)) return "—";
  switch (unit) {
    case "s": {
      const abs = Math.abs(value);
      if (abs === 0) return "0 s";
      if (abs < 1e-3) return `${significant(value * 1e6)} µs`;
      if (abs < 1) return `${significant(value * 1e3)} ms`;
      return `${significant(value)} s`;
    }
    case "reqps":
      return `${significant(value)} req/s`;
    case "ops":
      return `${significant(value)} ops/s`;
    case "percentunit":
      return `${significant(value * 100)}%`;
    case "bytes":
      return scaled(value, 1024, [" B", " KiB", " MiB", " GiB", " TiB"]);
    default:
      return scaled(value, 1000, ["", " K", " Mil", " Bil", " Tri"]);
  }
}

const escapeHtml = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

/** Round tick values from `min` to at least `max`, about `count` of them; round in KiB, MiB, ... for bytes. */
function ticks(min: number, max: number, count: number, unit: string | undefined): number[] {
  if (unit === "bytes" && max >= 1024) {
    const scale = 1024 ** Math.floor(Math.log(max) / Math.log(1024));
    return ticks(min / scale, max / scale, count, undefined).map((t) => t * scale);
  }
  const span = max - min || Math.abs(max) || 1;
  const raw = span / count;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= raw)!;
  const out: number[] = [];
  for (let v = Math.floor(min / step) * step; v < max + step * 0.999; v += step) out.push(Number(v.toPrecision(12)));
  return out;
}

/** Cumulative sums across the series at each step, for a panel stacking them ("normal"); a missing value adds nothing. */
function stacked(series: Series[]): Series[] {
  const sums: number[] = [];
  return series.map((s) => ({
    legend: s.legend,
    values: s.values.map((v, i) => {
      if (Number.isNaN(v)) return Number.NaN;
      sums[i] = (sums[i] ?? 0) + v;
      return sums[i]!;
    }),
  }));
}

/** The SVG path through the values, broken where one is missing (spanNulls: false). */
function linePath(values: number[], x: (i: number) => number, y: (v: number) => number): string {
  let path = "";
  let drawing = false;
  values.forEach((v, i) => {
    if (Number.isNaN(v)) return void (drawing = false);
    path += `${drawing ? "L" : "M"}${x(i).toFixed(1)},${y(v).toFixed(1)}`;
    drawing = true;
  });
  return path;
}

/** The area under each run of values, down to the axis. */
function areaPath(values: number[], x: (i: number) => number, y: (v: number) => number, base: number): string {
  let path = "";
  let run: number[] = [];
  const close = () => {
    if (run.length > 0) path += `M${x(run[0]!).toFixed(1)},${base}${run.map((i) => `L${x(i).toFixed(1)},${y(values[i]!).toFixed(1)}`).join("")}L${x(run.at(-1)!).toFixed(1)},${base}Z`;
    run = [];
  };
  values.forEach((v, i) => (Number.isNaN(v) ? close() : run.push(i)));
  close();
  return path;
}

const clock = (unixS: number) => new Date(unixS * 1000).toISOString().slice(11, 19);

interface Box {
  width: number;
  height: number;
}

/** Y axis labels, grid lines and time labels of a plot. */
function axes(box: Box, plotLeft: number, yTicks: number[], y: (v: number) => number, range: Range, unit: string | undefined): string {
  const parts: string[] = [];
  for (const t of yTicks) {
    parts.push(`<line x1="${plotLeft}" x2="${box.width}" y1="${y(t).toFixed(1)}" y2="${y(t).toFixed(1)}" class="grid"/>`);
    parts.push(`<text x="${plotLeft - 6}" y="${(y(t) + 4).toFixed(1)}" text-anchor="end">${escapeHtml(formatValue(t, unit))}</text>`);
  }
  const plotWidth = box.width - plotLeft;
  const spanS = Math.max(1, (range.steps - 1) * range.stepS);
  // Labels on round times, as far apart as their width needs.
  const everyS = [5, 10, 15, 20, 30, 60, 120, 300, 600, 1800, 3600].find((s) => (s / spanS) * plotWidth >= 70) ?? 3600;
  for (let t = Math.ceil(range.startS / everyS) * everyS; t <= range.startS + spanS; t += everyS) {
    const x = plotLeft + ((t - range.startS) / spanS) * plotWidth;
    if (x < plotLeft + 24 || x > box.width - 24) continue;
    parts.push(`<line x1="${x.toFixed(1)}" x2="${x.toFixed(1)}" y1="4" y2="${box.height - 16}" class="grid"/>`);
    parts.push(`<text x="${x.toFixed(1)}" y="${box.height - 2}" text-anchor="middle">${clock(t)}</text>`);
  }
  return parts.join("");
}

/** A time series panel's plot: the lines (areas when filled) over their axes. */
function plot(panel: Panel, series: Series[], range: Range, box: Box): string {
  const defaults = panel.fieldConfig?.defaults ?? {};
  const drawn = defaults.custom?.stacking?.mode === "normal" ? stacked(series) : series;
  const all = drawn.flatMap((s) => s.values).filter((v) => !Number.isNaN(v));
  const dataMin = all.length > 0 ? Math.min(...all) : 0;
  const dataMax = all.length > 0 ? Math.max(...all) : 1;
  const yTicks = ticks(defaults.min ?? Math.min(0, dataMin), dataMax > (defaults.min ?? 0) ? dataMax : (defaults.min ?? 0) + 1, Math.max(2, Math.floor(box.height / 45)), defaults.unit);
  const [low, high] = [yTicks[0]!, yTicks.at(-1)!];
  const plotLeft = 14 + Math.max(...yTicks.map((t) => formatValue(t, defaults.unit).length)) * 6.6;
  const top = 6;
  const bottom = box.height - 16;
  const x = (i: number) => plotLeft + (i / Math.max(1, range.steps - 1)) * (box.width - plotLeft);
  const y = (v: number) => bottom - ((v - low) / (high - low || 1)) * (bottom - top);
  const fill = (defaults.custom?.fillOpacity ?? 0) / 100;
  const shapes = drawn.map((s, k) => {
    const color = COLORS[k % COLORS.length]!;
    const area = fill > 0 ? `<path d="${areaPath(s.values, x, y, y(Math.max(low, 0)))}" fill="${color}" fill-opacity="${fill}" stroke="none"/>` : "";
    return `${area}<path d="${linePath(s.values, x, y)}" fill="none" stroke="${color}" stroke-width="1.5"/>`;
  });
  const empty = all.length === 0 ? `<text x="${(plotLeft + box.width) / 2}" y="${(top + bottom) / 2}" text-anchor="middle" class="nodata">No data</text>` : "";
  // Stacked areas are drawn last first, so each lower series stays visible over the ones above it.
  const ordered = defaults.custom?.stacking?.mode === "normal" ? shapes.reverse() : shapes;
  return `<svg width="${box.width}" height="${box.height}">${axes(box, plotLeft, yTicks, y, range, defaults.unit)}${ordered.join("")}${empty}</svg>`;
}

/** What a legend calc names, of a series' values. */
function calc(name: string, values: number[]): number {
  const present = values.filter((v) => !Number.isNaN(v));
  if (present.length === 0) return Number.NaN;
  if (name === "max") return Math.max(...present);
  if (name === "min") return Math.min(...present);
  if (name === "mean") return present.reduce((a, b) => a + b, 0) / present.length;
  return present.at(-1)!; // lastNotNull, last
}

const CALC_NAMES: Record<string, string> = { lastNotNull: "Last *", last: "Last", max: "Max", min: "Min", mean: "Mean" };

/** How many lines a legend of `count` series takes when it may take `rows`: the last says how many more there are. */
const legendLines = (count: number, rows: number) => Math.min(count, rows);

/** The legend as the panel asks for it: a table of each series with its calcs in at most `rows` lines, the last naming what did not fit. */
function legend(panel: Panel, series: Series[], rows: number): string {
  const calcs = panel.options?.legend?.calcs ?? [];
  const unit = panel.fieldConfig?.defaults?.unit;
  const head = `<tr><th></th>${calcs.map((c) => `<th>${CALC_NAMES[c] ?? c}</th>`).join("")}</tr>`;
  const shown = series.length > rows ? series.slice(0, rows - 1) : series;
  const body = shown.map((s, k) => {
    const cells = calcs.map((c) => `<td>${escapeHtml(formatValue(calc(c, s.values), unit))}</td>`).join("");
    return `<tr><td class="name"><i style="background:${COLORS[k % COLORS.length]}"></i>${escapeHtml(s.legend)}</td>${cells}</tr>`;
  });
  if (shown.length < series.length) body.push(`<tr><td class="name more">and ${series.length - shown.length} more series</td></tr>`);
  return `<table class="legend">${head}${body.join("")}</table>`;
}

/** Pixels of one gridPos box on the page. */
function place(gridPos: Panel["gridPos"], top: number): { left: number; top: number; width: number; height: number } {
  const column = (WIDTH_PX - 2 * PAGE_PADDING_PX + GAP_PX) / 24;
  return {
    left: PAGE_PADDING_PX + gridPos.x * column,
    top: top + gridPos.y * CELL_H_PX,
    width: gridPos.w * column - GAP_PX,
    height: gridPos.h * CELL_H_PX - GAP_PX,
  };
}

function panelHtml(panel: Panel, series: Series[], range: Range, top: number): string {
  const at = place(panel.gridPos, top);
  const style = `left:${at.left.toFixed(1)}px;top:${at.top}px;width:${at.width.toFixed(1)}px;height:${at.height}px`;
  if (panel.type === "row") return `<div class="row" style="${style}">${escapeHtml(panel.title)}</div>`;
  const innerWidth = Math.floor(at.width - 16);
  const available = at.height - 36;
  // The legend (a header and its lines) takes what it needs up to 55% of the panel; the plot keeps the rest.
  const rows = Math.max(1, Math.floor((available * 0.55) / LEGEND_ROW_PX) - 1);
  const legendPx = series.length > 0 ? (legendLines(series.length, rows) + 1) * LEGEND_ROW_PX + 6 : 0;
  const chart = plot(panel, series, range, { width: innerWidth, height: available - legendPx });
  return `<div class="panel" style="${style}"><div class="title">${escapeHtml(panel.title)}</div>${chart}${series.length > 0 ? legend(panel, series, rows) : ""}</div>`;
}

const STYLE = `
body { margin: 0; background: #111217; color: #ccccdc; font: 12px/1.3 Inter, "Helvetica Neue", Arial, sans-serif; width: ${WIDTH_PX}px; }
h1 { font-size: 20px; font-weight: 500; margin: 0; padding: 12px ${PAGE_PADDING_PX}px 4px; }
.caption { padding: 0 ${PAGE_PADDING_PX}px 10px; color: #9fa7b3; max-width: 1400px; }
.grid-area { position: relative; }
.panel { position: absolute; box-sizing: border-box; background: #181b1f; border: 1px solid #2a2d33; border-radius: 2px; padding: 6px 8px; overflow: hidden; }
.row { position: absolute; font-size: 15px; font-weight: 500; line-height: ${CELL_H_PX - GAP_PX}px; }
.title { font-size: 13px; font-weight: 500; margin-bottom: 6px; white-space: nowrap; overflow: hidden; }
svg text { fill: #9fa7b3; font-size: 10.5px; }
svg .grid { stroke: #2c3036; stroke-width: 1; }
svg .nodata { font-size: 14px; fill: #6e7380; }
.legend { border-collapse: collapse; width: 100%; font-size: 11px; }
.legend th { text-align: right; font-weight: 500; color: #6e9fff; padding: 0 6px; height: ${LEGEND_ROW_PX}px; white-space: nowrap; }
.legend td { text-align: right; padding: 0 6px; height: ${LEGEND_ROW_PX}px; line-height: ${LEGEND_ROW_PX}px; white-space: nowrap; }
.legend td.name { text-align: left; width: 100%; max-width: 0; overflow: hidden; text-overflow: ellipsis; }
.legend td.more { color: #6e7380; }
.legend i { display: inline-block; width: 12px; height: 3px; margin: 0 6px 3px 0; vertical-align: middle; }
`;

/** The page: the dashboard's title, the caption, then every panel where its gridPos puts it. */
export function renderDashboard(dashboard: Dashboard, seriesOf: Map<number, Series[]>, range: Range, caption: string): string {
  const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
  const bottom = Math.max(...panels.map((p) => p.gridPos.y + p.gridPos.h));
  const body = panels.map((p) => panelHtml(p, seriesOf.get(p.id) ?? [], range, 0)).join("\n");
  return `<!doctype html><html><head><meta charset="utf-8"><title>${escapeHtml(dashboard.title)}</title><style>${STYLE}</style></head><body>
<h1>${escapeHtml(dashboard.title)}</h1>
<div class="caption">${escapeHtml(caption)}</div>
<div class="grid-area" style="height:${bottom * CELL_H_PX + PAGE_PADDING_PX}px">
${body}
</div></body></html>`;
}

export const PAGE_WIDTH_PX = WIDTH_PX;

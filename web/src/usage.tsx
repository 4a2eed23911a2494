/**
 * The Usage page: credits spent per UTC day over the last 30 days, stacked by model, drawn as
 * plain SVG (no chart library: a few rectangles and labels weigh less than any), with a table of
 * the same figures for screen readers and the period's totals beside it.
 */
import { useResource } from "./pages.tsx";

interface ModelSpend {
  model: string;
  credits: number;
  jobs: number;
}

interface Usage {
  days: number;
  credits_spent: number;
  jobs: number;
  models: ModelSpend[];
  data: { day: string; credits: number; jobs: number; models: ModelSpend[] }[];
}

/** Okabe and Ito's palette, told apart with the common colour-vision deficiencies. */
const COLOURS = ["#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000"];
const WIDTH = 640;
const HEIGHT = 240;
const PLOT = { left: 52, right: 8, top: 12, bottom: 36 };

const fmt = (n: number) => n.toLocaleString("en-US");
const dayLabel = (day: string) => new Date(`${day}T00:00:00Z`).toLocaleDateString("en-US", { month: "short", day: "numeric", timeZone: "UTC" });

/** The smallest 1, 2 or 5 times a power of ten at or above `n` (at least 1): the y axis's top. */
export function axisTop(n: number): number {
  if (n <= 1) return 1;
  const power = 10 ** Math.floor(Math.log10(n));
  return [1, 2, 5, 10].map((m) => m * power).find((top) => top >= n)!;
}

function Chart({ usage, colourOf }: { usage: Usage; colourOf: (model: string) => string }) {
  const top = axisTop(Math.max(...usage.data.map((d) => d.credits)));
  const plotWidth = WIDTH - PLOT.left - PLOT.right;
  const plotHeight = HEIGHT - PLOT.top - PLOT.bottom;
  const slot = plotWidth / usage.data.length;
  const y = (credits: number) => PLOT.top + plotHeight - (credits / top) * plotHeight;
  const last = usage.data.length - 1;
  return (
    <svg class="usage-chart" viewBox={`0 0 ${WIDTH} ${HEIGHT}`} role="img" aria-labelledby="usage-chart-title usage-chart-desc">
      <title id="usage-chart-title">Credits spent per day, last {usage.days} days, by model</title>
      <desc id="usage-chart-desc">
        {fmt(usage.credits_spent)} credits in all, the most in one day {fmt(Math.max(...usage.data.map((d) => d.credits)))}. The table below has each day's figures.
      </desc>
      {[0, top / 2, top].map((tick) => (
        <g key={tick} class="usage-tick">
          <line x1={PLOT.left} x2={WIDTH - PLOT.right} y1={y(tick)} y2={y(tick)} />
          <text x={PLOT.left - 6} y={y(tick)} dy="0.32em" text-anchor="end">{fmt(tick)}</text>
        </g>
      ))}
      <text class="usage-axis" transform={`translate(12 ${PLOT.top + plotHeight / 2}) rotate(-90)`} text-anchor="middle">credits</text>
      {usage.data.map((d, i) => {
        let base = 0;
        return (
          <g key={d.day}>
            {d.models.map((m) => {
              const rect = (
                <rect
                  key={m.model}
                  data-day={d.day}
                  data-model={m.model}
                  data-credits={m.credits}
                  x={PLOT.left + i * slot + slot * 0.15}
                  width={slot * 0.7}
                  y={y(base + m.credits)}
                  height={y(base) - y(base + m.credits)}
                  fill={colourOf(m.model)}
                >
                  <title>{`${dayLabel(d.day)}: ${m.model}, ${fmt(m.credits)} credits`}</title>
                </rect>
              );
              base += m.credits;
              return rect;
            })}
            {(last - i) % 7 === 0 && (
              <text class="usage-day" x={PLOT.left + (i + 0.5) * slot} y={HEIGHT - PLOT.bottom + 16} text-anchor="middle">{dayLabel(d.day)}</text>
            )}
          </g>
        );
      })}
      <text class="usage-axis" x={PLOT.left + plotWidth / 2} y={HEIGHT - 4} text-anchor="middle">day (UTC)</text>
    </svg>
  );
}

function Totals({ usage, colourOf }: { usage: Usage; colourOf: (model: string) => string }) {
  return (
    <div class="usage-totals">
      <dl>
        <dt id="usage-credits-label">Credits in {usage.days} days</dt>
        <dd><output aria-labelledby="usage-credits-label">{fmt(usage.credits_spent)}</output></dd>
        <dt id="usage-jobs-label">Jobs charged</dt>
        <dd><output aria-labelledby="usage-jobs-label">{fmt(usage.jobs)}</output></dd>
      </dl>
      {usage.models.length > 0 && (
        <ul class="usage-legend" aria-label="By model">
          {usage.models.map((m) => (
            <li key={m.model} data-model={m.model}>
              <span class="usage-swatch" style={{ background: colourOf(m.model) }} aria-hidden="true" />
              <code>{m.model}</code>: {fmt(m.credits)} credits, {fmt(m.jobs)} {m.jobs === 1 ? "job" : "jobs"}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

export function UsagePage() {
  const { data, error } = useResource<Usage>("/usage");
  const colourOf = (model: string) => COLOURS[Math.max(0, data?.models.findIndex((m) => m.model === model) ?? 0) % COLOURS.length]!;
  return (
    <section aria-labelledby="usage-title">
      <h2 id="usage-title">Usage</h2>
      {error && <p role="alert">{error}</p>}
      {data && (
        <>
          {data.credits_spent === 0 && <p>Nothing spent in the last {data.days} days.</p>}
          <div class="usage-layout">
            <Chart usage={data} colourOf={colourOf} />
            <Totals usage={data} colourOf={colourOf} />
          </div>
          <div class="usage-sr">
          <table>
            <caption>Credits spent per day, by model</caption>
            <thead>
              <tr><th>Day (UTC)</th><th>Model</th><th>Credits</th><th>Jobs</th></tr>
            </thead>
            <tbody>
              {data.data.flatMap((d) =>
                d.models.map((m) => (
                  <tr key={`${d.day} ${m.model}`}>
                    <td>{d.day}</td>
                    <td>{m.model}</td>
                    <td>{m.credits}</td>
                    <td>{m.jobs}</td>
                  </tr>
                )),
              )}
            </tbody>
          </table>
          </div>
        </>
      )}
    </section>
  );
}

/**
 * docs/grafana-dashboard.json cannot drift from the code: every metric its queries name is one a
 * running service exports on its /metrics, every metric of the service's own (`svc_*`) has a
 * panel, and every panel reads the `${DS_PROMETHEUS}` datasource variable.
 */
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { after, before, test } from "node:test";
import { migratedTestDb, startTestGateway, type TestGateway } from "../support/service.ts";

interface Target {
  expr: string;
  datasource?: { uid?: string };
}
interface Panel {
  type: string;
  title: string;
  datasource?: { type?: string; uid?: string };
  targets?: Target[];
  panels?: Panel[];
}
interface Dashboard {
  schemaVersion: number;
  panels: Panel[];
  templating: { list: { name: string; type: string; query: unknown }[] };
}

const PROMQL_WORDS = new Set(["and", "or", "unless", "bool", "offset", "inf", "nan"]);

/** The metric names a PromQL expression reads: what is left once labels, ranges, groupings, functions, variables and numbers are taken out. */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"[^"]*"/g, "")
    .replace(/\{[^}]*\}/g, "")
    .replace(/\[[^\]]*\]/g, "")
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, "")
    .replace(/\$\w+/g, "")
    .replace(/\b\d[\w.]*/g, "");
  const names: string[] = [];
  for (const [, name, call] of bare.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\()?/g)) {
    if (call === undefined && !PROMQL_WORDS.has(name!)) names.push(name!);
  }
  return names;
}

/** Every sample name a scrape can hold, from its `# TYPE` lines (a histogram's _bucket, _sum and _count). */
function exported(text: string): { families: Set<string>; samples: Set<string> } {
  const families = new Set<string>();
  const samples = new Set<string>();
  for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    families.add(name!);
    samples.add(name!);
    if (type === "histogram") for (const suffix of ["_bucket", "_sum", "_count"]) samples.add(`${name}${suffix}`);
    if (type === "summary") for (const suffix of ["_sum", "_count"]) samples.add(`${name}${suffix}`);
  }
  return { families, samples };
}

let gateway: TestGateway;
let dashboard: Dashboard;
before(async () => {
  dashboard = JSON.parse(await readFile("docs/grafana-dashboard.json", "utf8")) as Dashboard;
  gateway = await startTestGateway({ db: await migratedTestDb(), workers: [], metrics: { port: 0 } });
});
after(() => gateway.close());

const panelsOf = (panels: Panel[]): Panel[] => panels.flatMap((p) => [p, ...panelsOf(p.panels ?? [])]).filter((p) => p.type !== "row");

test("the dashboard is Grafana 10's schema and reads Prometheus through ${DS_PROMETHEUS}", () => {
  assert.ok(dashboard.schemaVersion >= 38, `schemaVersion ${dashboard.schemaVersion}`);
  const variable = dashboard.templating.list.find((v) => v.name === "DS_PROMETHEUS");
  assert.deepEqual([variable?.type, variable?.query], ["datasource", "prometheus"]);
  const panels = panelsOf(dashboard.panels);
  assert.ok(panels.length >= 12);
  for (const panel of panels) {
    assert.equal(panel.datasource?.uid, "${DS_PROMETHEUS}", panel.title);
    assert.ok((panel.targets ?? []).length > 0, `${panel.title} has queries`);
    for (const target of panel.targets!) assert.equal(target.datasource?.uid, "${DS_PROMETHEUS}", panel.title);
  }
});

test("every metric the dashboard queries is exported by a running service, and every svc_ metric is on it", async () => {
  const res = await fetch(gateway.service.metrics!.url);
  assert.equal(res.status, 200);
  const { families, samples } = exported(await res.text());
  const used = new Set<string>();
  for (const panel of panelsOf(dashboard.panels)) {
    for (const { expr } of panel.targets!) {
      const names = metricNames(expr);
      assert.ok(names.length > 0, `${panel.title}: ${expr} names no metric`);
      for (const name of names) {
        assert.ok(samples.has(name), `${panel.title}: ${name} is not exported`);
        used.add(name);
      }
    }
  }
  const onDashboard = (family: string) => [...used].some((name) => name === family || name.startsWith(`${family}_`));
  const missing = [...families].filter((family) => family.startsWith("svc_") && !onDashboard(family));
  assert.deepEqual(missing, [], "svc_ metrics with no panel");
});

test("the metric names are read out of PromQL, not its functions, labels or variables", () => {
  assert.deepEqual(metricNames('histogram_quantile(0.99, sum by (route, le) (rate(svc_x_bucket{instance=~"$instance"}[$__rate_interval])))'), ["svc_x_bucket"]);
  assert.deepEqual(metricNames("max(a_total) / on (kind) b_total offset 5m"), ["a_total", "b_total"]);
});

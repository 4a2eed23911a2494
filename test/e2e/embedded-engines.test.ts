/**
 * The embedded database's engine: a new data dir gets SQLite, and a data dir PGlite made keeps
 * PGlite across restarts (its data stays where it is), whatever engine a new one would get. The
 * whole service, a paid completion and its job, runs on either.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, test } from "node:test";
import { jobConcluded } from "../support/eventually.ts";
import { MODEL, startTestGateway, tempDir } from "../support/service.ts";

const dirs: { remove(): Promise<void> }[] = [];
after(() => Promise.all(dirs.map((dir) => dir.remove())));

async function paidCompletion(gateway: Awaited<ReturnType<typeof startTestGateway>>): Promise<string> {
  const { data, response } = await gateway.client.chat.completions
    .create({ model: MODEL, messages: [{ role: "user", content: "Hello" }], max_tokens: 4 })
    .withResponse();
  assert.ok(data.choices[0]!.message.content !== null);
  return response.headers.get("x-svc-job-id")!;
}

test("a new data dir holds a SQLite database, which a restart opens again", { timeout: 120_000 }, async () => {
  const dir = await tempDir("svc-engine-sqlite-");
  dirs.push(dir);
  const first = await startTestGateway({ dataDir: dir.path });
  assert.equal(first.service.db.kind, "sqlite");
  const jobId = await paidCompletion(first);
  await jobConcluded(first.service, jobId);
  await first.close();
  assert.ok(existsSync(join(dir.path, "svc.sqlite")));
  assert.ok(!existsSync(join(dir.path, "pgdata")));

  const second = await startTestGateway({ dataDir: dir.path });
  try {
    assert.equal(second.service.db.kind, "sqlite");
    const [job] = await second.service.db.query<{ status: string }>("SELECT status FROM jobs WHERE id = $1", [jobId]);
    assert.equal(job?.status, "settled");
  } finally {
    await second.close();
  }
});

test("a data dir PGlite made keeps PGlite, and its jobs, when the service starts again", { timeout: 180_000 }, async () => {
  const dir = await tempDir("svc-engine-pglite-");
  dirs.push(dir);
  const first = await startTestGateway({ dataDir: dir.path, embedded: "pglite" });
  assert.equal(first.service.db.kind, "pglite");
  const jobId = await paidCompletion(first);
  await jobConcluded(first.service, jobId);
  await first.close();

  const second = await startTestGateway({ dataDir: dir.path, embedded: "sqlite" });
  try {
    assert.equal(second.service.db.kind, "pglite", "the data dir's own engine, not the one asked for a new one");
    assert.ok(!existsSync(join(dir.path, "svc.sqlite")));
    const [job] = await second.service.db.query<{ status: string }>("SELECT status FROM jobs WHERE id = $1", [jobId]);
    assert.equal(job?.status, "settled");
    await paidCompletion(second);
  } finally {
    await second.close();
  }
});

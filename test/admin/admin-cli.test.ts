/**
 * `svc admin` as a real child process against the embedded store. With a node running on the
 * data dir, the command acts through the node's admin socket (a file only its owner may open):
 * a suspended key is refused on the next request, and works again once reinstated; the audit log
 * lists both, with reason and who. With no node running (no socket, or a file a dead node left),
 * the command opens the data dir itself. Exit codes: 0 done, 1 refused, 2 usage.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { stat, writeFile } from "node:fs/promises";
import { hostname, userInfo } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { generateKeypair } from "../../src/core/keys.ts";
import { startTestGateway, tempDir, type TestGateway } from "../support/service.ts";
import { MODEL } from "../support/service.ts";

const MAIN = join(import.meta.dirname, "..", "..", "src", "cli", "main.ts");

let dir: { path: string; remove(): Promise<void> };
let gateway: TestGateway | undefined;

before(async () => {
  dir = await tempDir("svc-admin-cli-");
  gateway = await startTestGateway({ dataDir: dir.path });
});
after(async () => {
  await gateway?.close();
  await dir.remove();
});

/** `svc admin <args> --data-dir <dir>`, to its end. */
function admin(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ["--import", "tsx", MAIN, "admin", ...args, "--data-dir", dir.path], { env: { ...process.env, DATABASE_URL: "" }, timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? Number((error as { code?: number }).code ?? -1) : 0, stdout, stderr });
    });
  });
}

const hi = [{ role: "user" as const, content: "Hi" }];

test("through a running node: a key suspended is refused 403 key_suspended, reinstated it works; the log lists both", async () => {
  const { wallet, client, service } = gateway!;
  assert.ok((await client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 4 })).choices[0], "the key works, and is cached");
  const socket = await stat(join(dir.path, "admin.sock"));
  assert.ok(socket.isSocket());
  assert.equal(socket.mode & 0o777, 0o600, "only the data dir's owner may connect");

  const suspended = await admin("keys", "suspend", "--wallet", wallet, "--reason", "abuse reported by upstream");
  assert.equal(suspended.code, 0, suspended.stderr);
  assert.match(suspended.stdout, new RegExp(`Suspended the API key of wallet ${wallet}`));
  await assert.rejects(client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 4 }), (error: { status: number; code: string }) => {
    assert.equal(error.status, 403);
    assert.equal(error.code, "key_suspended");
    return true;
  });

  const reinstated = await admin("keys", "reinstate", "--wallet", wallet, "--reason", "resolved", "--by", "alice");
  assert.equal(reinstated.code, 0, reinstated.stderr);
  assert.ok((await client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 4 })).choices[0], "the key works again");

  const log = await admin("log");
  assert.equal(log.code, 0, log.stderr);
  const lines = log.stdout.trim().split("\n");
  assert.match(lines[0]!, new RegExp(`alice  keys\\.reinstate  ${wallet}  reason: resolved$`));
  assert.match(lines[1]!, new RegExp(`${userInfo().username}@${hostname()}  keys\\.suspend  ${wallet}  reason: abuse reported by upstream$`));
  assert.equal(service.pool.size, 1, "the node kept running throughout");
});

test("refusals exit 1 and usage errors exit 2, through the node", async () => {
  const stranger = generateKeypair().address;
  const unknown = await admin("keys", "suspend", "--wallet", stranger, "--reason", "spam");
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, new RegExp(`svc admin: no API key for wallet ${stranger}`));
  const notSuspended = await admin("workers", "reinstate", "--worker", stranger);
  assert.equal(notSuspended.code, 1);
  assert.match(notSuspended.stderr, /is not suspended/);
  const noReason = await admin("keys", "suspend", "--wallet", stranger);
  assert.equal(noReason.code, 2);
  assert.match(noReason.stderr, /--reason is required/);
  const unknownCommand = await admin("keys", "delete");
  assert.equal(unknownCommand.code, 2);
  assert.match(unknownCommand.stderr, /unknown command 'keys delete'[\s\S]*Usage: svc admin/);
});

test("with no node running, svc admin opens the data dir itself, also past a socket file a dead node left", async () => {
  await gateway!.close();
  gateway = undefined;
  await assert.rejects(stat(join(dir.path, "admin.sock")), { code: "ENOENT" }, "the node removed its socket");
  const worker = generateKeypair().address;
  const suspended = await admin("workers", "suspend", "--worker", worker, "--reason", "offline cheating", "--by", "bob");
  assert.equal(suspended.code, 0, suspended.stderr);

  // A socket file nobody listens on: connecting is refused, as after a node was killed.
  await writeFile(join(dir.path, "admin.sock"), "");
  const listed = await admin("workers", "list");
  assert.equal(listed.code, 0, listed.stderr);
  assert.match(listed.stdout, new RegExp(`${worker}  since \\S+  offline cheating`));
  const log = await admin("log", "--limit", "3");
  assert.equal(log.code, 0, log.stderr);
  assert.deepEqual(log.stdout.trim().split("\n").map((line) => line.split("  ").slice(1, 3)), [
    ["bob", "workers.suspend"],
    ["alice", "keys.reinstate"],
    [`${userInfo().username}@${hostname()}`, "keys.suspend"],
  ]);
});

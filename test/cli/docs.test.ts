/**
 * The pages a new user reads first say what the code does: docs/models.md lists exactly the
 * catalog, and the README and that page name the wiring model's real trigger word and replies.
 */
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { test } from "node:test";
import { LAUNCH_CATALOG, WIRING_MODEL } from "../../src/catalog/catalog.ts";
import { KNOWN_REPLY, LOOP_MARGIN, LOOP_UNIT, PENALTY_ENDING, TRIGGER_WORD } from "../../src/inference/wiring-model.ts";

test("docs/models.md lists every catalog model with its owner, tier, size and context window", async () => {
  const page = await readFile("docs/models.md", "utf8");
  const rows = page
    .split("\n")
    .filter((line) => line.startsWith("| `"))
    .map((line) => line.split("|").slice(1, -1).map((cell) => cell.trim()));
  const listed = rows.map(([id, owner, tier, parameters, window]) => ({
    id: id!.replace(/`/g, ""),
    ownedBy: owner,
    tier,
    parameters,
    contextWindow: Number(window!.replace(/,/g, "")),
  }));
  // The approvals every deployment starts with, and the wiring model every gateway serves.
  const catalog = [...LAUNCH_CATALOG, WIRING_MODEL]
    .map(({ id, ownedBy, tier, parameters, contextWindow }) => ({ id, ownedBy, tier, parameters, contextWindow }));
  assert.deepEqual(listed, catalog);
});

test("the README and docs/models.md name the wiring model's trigger word, replies and --host", async () => {
  const readme = await readFile("README.md", "utf8");
  const models = await readFile("docs/models.md", "utf8");
  for (const page of [readme, models]) {
    assert.ok(page.includes(`\`${TRIGGER_WORD}\``), "the trigger word");
    assert.ok(page.includes(KNOWN_REPLY), "the fixed reply");
  }
  assert.ok(models.includes(`\`${LOOP_UNIT}\``) && models.includes(`\`${PENALTY_ENDING}\``) && models.includes(String(LOOP_MARGIN)));
  assert.match(readme, /`--host`/);
  assert.match(readme, /docs\/models\.md/);
});

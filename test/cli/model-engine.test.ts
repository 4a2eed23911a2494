/** `svc dev --model <file.gguf>`: any local GGUF is served and joins the catalog under `local/`. */
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { defaultCatalog, WIRING_MODEL } from "../../src/catalog/catalog.ts";
import { loadModelEngine } from "../../src/cli/model-engine.ts";
import { silentLogger } from "../../src/core/logger.ts";
import { ensureWiringModel, KNOWN_REPLY } from "../../src/inference/wiring-model.ts";
import { tempDir } from "../support/service.ts";

const dir = await tempDir("svc-model-engine-");
after(() => dir.remove());

test("the built-in model by default, any GGUF file on request", async () => {
  const catalog = defaultCatalog();
  const builtin = await loadModelEngine({ spec: undefined, dataDir: dir.path, catalog, logger: silentLogger() });
  assert.equal(builtin.model, WIRING_MODEL);
  await builtin.engine.close();

  // Any GGUF path: here the wiring model's own file, served as a local model.
  const file = await ensureWiringModel(`${dir.path}/elsewhere`);
  const local = await loadModelEngine({ spec: file, dataDir: dir.path, catalog, logger: silentLogger() });
  assert.equal(local.model.id, "local/svc-wiring-model");
  assert.equal(catalog.get("local/svc-wiring-model"), local.model, "approved into the catalog");
  assert.equal(local.model.contextWindow, local.engine.contextWindow);
  let text = "";
  for await (const event of local.engine.generate({
    messages: [{ role: "user", content: "Hi" }],
    maxTokens: 20,
    temperature: 0,
    topP: 1,
    stop: [],
    frequencyPenalty: 0,
    presencePenalty: 0,
  })) {
    if (event.type === "delta") text += event.text;
  }
  assert.equal(text, KNOWN_REPLY);
  await local.engine.close();

  await assert.rejects(loadModelEngine({ spec: `${dir.path}/missing.gguf`, dataDir: dir.path, catalog, logger: silentLogger() }));
});

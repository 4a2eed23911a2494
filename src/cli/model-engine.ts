/**
 * The engine `svc dev` serves: the built-in wiring model by default, or any GGUF file or
 * `hf:` model, which then joins the catalog under a `local/` id.
 */
import { basename, join } from "node:path";
import { WIRING_MODEL, type Catalog, type CatalogModel } from "../catalog/index.ts";
import type { Logger } from "../core/index.ts";
import { ensureWiringModel, LlamaEngine, resolveModelSource, type Engine } from "../inference/index.ts";
import { progressBar } from "./progress-bar.ts";

export async function loadModelEngine(input: {
  spec: string | undefined;
  dataDir: string;
  catalog: Catalog;
  logger: Logger;
}): Promise<{ engine: Engine; model: CatalogModel }> {
  const modelsDir = join(input.dataDir, "models");
  if (input.spec === undefined || input.spec === "builtin") {
    const path = await ensureWiringModel(modelsDir);
    // One thread: the tiny model gains nothing from more and slows down with contention.
    return { engine: await LlamaEngine.load({ modelPath: path, threads: 1 }), model: WIRING_MODEL };
  }
  const path = await resolveModelSource(input.spec, modelsDir, progressBar());
  const engine = await LlamaEngine.load({ modelPath: path });
  const model: CatalogModel = {
    id: `local/${basename(path).replace(/\.gguf$/i, "")}`,
    ownedBy: "local",
    tier: "lite",
    parameters: "unknown",
    contextWindow: engine.contextWindow,
    created: Math.floor(Date.now() / 1000),
    description: `Local model served from ${path}`,
  };
  input.catalog.approve(model);
  input.logger.info({ model: model.id, path }, "serving a local model");
  return { engine, model };
}

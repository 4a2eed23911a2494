/**
 * A node's id: given (--node-id), else kept in the data dir so a restart is the same node and
 * finishes its own work at once; a node with no data dir is a new node each start.
 */
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { newId } from "../core/index.ts";

const NODE_ID = /^[A-Za-z0-9_.:-]{1,64}$/;

export async function loadNodeId(given: string | undefined, dataDir: string | undefined): Promise<string> {
  if (given !== undefined) {
    if (!NODE_ID.test(given)) throw new TypeError(`a node id is 1-64 letters, digits and _.:-, got '${given}'`);
    return given;
  }
  if (dataDir === undefined) return newId("node");
  const file = join(dataDir, "node-id");
  const kept = await readFile(file, "utf8").then((text) => text.trim(), () => undefined);
  if (kept && NODE_ID.test(kept)) return kept;
  const id = newId("node");
  await mkdir(dataDir, { recursive: true });
  await writeFile(file, `${id}\n`);
  return id;
}

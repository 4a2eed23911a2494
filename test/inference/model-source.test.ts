import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { ModelSourceError, resolveModelSource } from "../../src/inference/model-source.ts";

describe("model source", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "model-source-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("returns a local .gguf path as it is", async () => {
    const file = path.join(dir, "m.gguf");
    await writeFile(file, "x");
    assert.equal(await resolveModelSource(file, dir), file);
  });

  it("fails clearly on a missing file, a directory, or something that is not a model", async () => {
    await assert.rejects(resolveModelSource(path.join(dir, "missing.gguf"), dir), (err: unknown) => {
      assert.ok(err instanceof ModelSourceError);
      assert.match(err.message, /not found/);
      return true;
    });
    const folder = path.join(dir, "folder.gguf");
    await mkdir(folder);
    await assert.rejects(resolveModelSource(folder, dir), /not a file/);
    await assert.rejects(resolveModelSource(path.join(dir, "model.bin"), dir), ModelSourceError);
  });

  it("rejects a malformed hf: spec without touching the network", async () => {
    for (const spec of ["hf:", "hf:user/repo", "hf:user/repo/file.bin", "hf:user//file.gguf"]) {
      await assert.rejects(resolveModelSource(spec, dir), /expected hf:owner\/repo/, spec);
    }
  });
});

import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { huggingFaceFileUrl, ModelSourceError, resolveModelSource } from "../../src/inference/model-source.ts";

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

  it("builds the file URL on HF_ENDPOINT, or huggingface.co without it", () => {
    assert.equal(huggingFaceFileUrl("hf:me/repo/sub/m#1.gguf", "http://mirror.test/hf/"), "http://mirror.test/hf/me/repo/resolve/main/sub/m%231.gguf");
    const saved = process.env.HF_ENDPOINT;
    delete process.env.HF_ENDPOINT;
    try {
      assert.equal(huggingFaceFileUrl("hf:me/repo/m.gguf"), "https://huggingface.co/me/repo/resolve/main/m.gguf");
    } finally {
      if (saved !== undefined) process.env.HF_ENDPOINT = saved;
    }
  });

  it("says which file was not there and when access was denied, before any download starts", async () => {
    // The end-to-end cases (refused, silent host, stalled or working download) run the CLI in
    // test/cli/model-download.test.ts; these two answers need only the first request.
    const server = createServer((req, res) => res.writeHead(req.url?.includes("/gated/") ? 401 : 404).end());
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const saved = process.env.HF_ENDPOINT;
    process.env.HF_ENDPOINT = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      await assert.rejects(resolveModelSource("hf:me/repo/absent.gguf", dir), (err: unknown) => {
        assert.ok(err instanceof ModelSourceError);
        assert.match(err.message, /^could not download hf:me\/repo\/absent\.gguf: no such file there .*\(tried http:\/\/127\.0\.0\.1:\d+\/me\/repo\/resolve\/main\/absent\.gguf\)$/);
        return true;
      });
      await assert.rejects(resolveModelSource("hf:me/gated/m.gguf", dir), /access denied .*HF_TOKEN/);
    } finally {
      if (saved === undefined) delete process.env.HF_ENDPOINT;
      else process.env.HF_ENDPOINT = saved;
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

#!/usr/bin/env -S node --v8-pool-size=1
// --v8-pool-size=1: one V8 background thread instead of Node's four. Each thread's allocations
// stay in a malloc arena of its own after start, about 11-15 MB of an idle node's memory in all;
// the service's JavaScript runs on one thread, and the load bench ran as fast with one
// (docs/performance.md). package.json's start script passes the same flag.
// Entry point of the `svc` command: runs the build of src/ that bin/build.js keeps current, with
// stack traces mapped back to the sources. Where dist/ cannot be written (a read-only install),
// it loads the sources through tsx instead.
import { pathToFileURL } from "node:url";
import { builtEntry } from "./build.js";

process.setSourceMapsEnabled(true);
let entry;
try {
  entry = pathToFileURL(await builtEntry()).href;
} catch (error) {
  if (!["EACCES", "EPERM", "EROFS"].includes(error?.code)) throw error;
  console.error(`svc: cannot write the build (${error.message}); loading the sources through tsx`);
  (await import("tsx/esm/api")).register();
  entry = "../src/cli/main.ts";
}
await import(entry);

#!/usr/bin/env node
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

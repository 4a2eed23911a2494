#!/usr/bin/env -S MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=131072 node
// MALLOC_ARENA_MAX=2: glibc gives every thread that allocates a malloc arena of its own and keeps
// what was freed in it; with V8's background threads, the chain's thread and libuv's pool, an
// idle node held megabytes it no longer used that way (docs/performance.md, "one malloc arena for
// the threads"). MALLOC_MMAP_THRESHOLD_=131072: glibc otherwise raises the size from which an
// allocation gets pages of its own each time such a block is freed, so large blocks allocated
// later stay in its heap once freed (an idle node 14-21 MB larger). package.json's start script
// and the deploy doc's unit set both.
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

import { existsSync } from "node:fs";
import { dirname, join } from "node:path";

/**
 * The directory holding the project's package.json, and with it docs/, web/ and program/. Found
 * by walking up from this module, which lives at a different depth when run from the sources
 * (src/core/) and from the build bin/svc.js runs (dist/<fingerprint>/).
 */
export const PACKAGE_ROOT = findPackageRoot(import.meta.dirname);

function findPackageRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, "package.json"))) return dir;
    if (dirname(dir) === dir) throw new Error(`no package.json above ${from}`);
  }
}

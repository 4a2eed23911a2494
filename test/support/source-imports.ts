/**
 * Reading the service's own source for the tests that check its shape (test/structure,
 * test/events/boundaries): which files there are, what each imports, and which part a path is in.
 */
import { relative, resolve, sep } from "node:path";

export { sourceFiles } from "../../scripts/function-lengths.ts";

export const SRC = resolve(import.meta.dirname, "..", "..", "src");

/** Every relative module specifier of a file: imports, re-exports, bare and dynamic imports. */
export function relativeSpecifiers(text: string): string[] {
  return [...text.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)["'](\.[^"']+)["']/g)].map((m) => m[1]!);
}

/**
 * The part of src a path is in; undefined for src/service.ts and the other files that assemble the
 * parts, and "(outside src)" for a path that is not under src at all.
 */
export function partOf(path: string): string | undefined {
  const [first, ...rest] = relative(SRC, path).split(sep);
  if (first === "..") return "(outside src)";
  return rest.length > 0 ? first : undefined;
}

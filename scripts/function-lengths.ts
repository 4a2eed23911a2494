// Lists functions longer than a limit, so the style rule "no function over ~70 lines" can be checked
// by a command instead of by eye. Usage: node --import tsx scripts/function-lengths.ts [--max 70] [dirs...]
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import ts from "typescript";

export interface LongFunction { file: string; name: string; line: number; lines: number }

/** The TypeScript files under `dir`, or `dir` itself when it is one file. */
export function sourceFiles(dir: string): string[] {
  if (!statSync(dir).isDirectory()) return [dir];
  const out: string[] = [];
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out.push(...sourceFiles(path));
    else if (path.endsWith(".ts") && !path.endsWith(".d.ts")) out.push(path);
  }
  return out;
}

function nameOf(node: ts.Node): string {
  if ((ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node)) && node.name) return node.name.getText();
  if (ts.isConstructorDeclaration(node)) return "constructor";
  const parent = node.parent;
  if (parent && ts.isVariableDeclaration(parent)) return parent.name.getText();
  if (parent && ts.isPropertyAssignment(parent)) return parent.name.getText();
  if (parent && ts.isPropertyDeclaration(parent)) return parent.name.getText();
  return "(anonymous)";
}

/** Functions (declarations, methods, arrows, accessors) in `file` spanning more than `max` lines. */
export function longFunctions(file: string, max: number, text = readFileSync(file, "utf8")): LongFunction[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: LongFunction[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && "body" in node && node.body) {
      const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const lines = end - start + 1;
      if (lines > max) found.push({ file, name: nameOf(node), line: start + 1, lines });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function main(args: string[]): void {
  const maxAt = args.indexOf("--max");
  const max = maxAt >= 0 ? Number(args[maxAt + 1]) : 70;
  const dirs = args.filter((_, i) => maxAt < 0 || (i !== maxAt && i !== maxAt + 1));
  const found = (dirs.length > 0 ? dirs : ["src"]).flatMap(sourceFiles).flatMap((file) => longFunctions(file, max));
  for (const f of found.sort((a, b) => b.lines - a.lines)) console.log(`${f.lines}\t${f.file}:${f.line}\t${f.name}`);
  process.exitCode = found.length > 0 ? 1 : 0;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) main(process.argv.slice(2));

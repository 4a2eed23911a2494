/** `tsx program/linker/main.ts <object.o> <program.so>`: link one BPF object into an sBPF v0 program. */
import { readFileSync, writeFileSync } from "node:fs";
import { link } from "./link.ts";

const [input, output] = process.argv.slice(2);
if (!input || !output) {
  console.error("usage: main.ts <object.o> <program.so>");
  process.exit(2);
}
writeFileSync(output, link(readFileSync(input)));

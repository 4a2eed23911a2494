/**
 * The web app's bundle: its size (raw and gzipped; the target is under 60 kB gzipped) and how long
 * esbuild takes to build it, as the service does on the first request for the page.
 * Run: npm run bench:web
 */
import { gzipSync } from "node:zlib";
import { appBundle } from "../src/web/index.ts";

const started = performance.now();
const bundle = await appBundle();
const buildMs = performance.now() - started;
const kB = (n: number) => `${(n / 1000).toFixed(1)} kB`;
console.log(`build: ${buildMs.toFixed(0)} ms (first in this process, esbuild in memory)`);
for (const [name, text] of [["html", bundle.html], ["js", bundle.js], ["css", bundle.css]] as const) {
  console.log(`${name}: ${kB(Buffer.byteLength(text))} raw, ${kB(gzipSync(text).length)} gzipped`);
}
const total = gzipSync(bundle.html).length + gzipSync(bundle.js).length + gzipSync(bundle.css).length;
console.log(`total gzipped: ${kB(total)}`);

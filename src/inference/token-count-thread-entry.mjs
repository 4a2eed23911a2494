// The token-count thread's first module (family-tokenizers.ts starts it): TypeScript loads through
// tsx here too, as in bin/svc.js, since a worker's entry is loaded before any `--import` of its own.
import { register } from "tsx/esm/api";

register();
await import("./token-count-thread-main.ts");

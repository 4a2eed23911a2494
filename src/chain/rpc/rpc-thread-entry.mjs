// The RPC server thread's first module (rpc-thread.ts starts it): TypeScript loads through tsx
// here too, as in bin/svc.js, since a worker's entry is loaded before any `--import` of its own.
import { register } from "tsx/esm/api";

register();
await import("./rpc-thread-main.ts");

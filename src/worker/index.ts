/** The worker part's public surface: the worker node, its client that dials a gateway, and `--model` specs. */
export { WorkerClient, WorkerRefusedError } from "./worker-client.ts";
export type { WorkerClientEvent, WorkerClientOptions } from "./worker-client.ts";
export { WorkerNode } from "./worker-node.ts";
export { describeEngine, loadEngine, ModelSpecError, parseModelSpec } from "./engine-spec.ts";
export type { EngineLoadOptions, EngineSpec, ModelSpec } from "./engine-spec.ts";

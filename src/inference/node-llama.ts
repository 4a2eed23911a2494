/**
 * node-llama-cpp, imported on first use: its modules hold about 50 MB, which a gateway that never
 * loads a model, or a `svc dev` whose model is not loaded yet, has no use for. Everything else
 * imports only its types.
 */
export function nodeLlamaCpp(): Promise<typeof import("node-llama-cpp")> {
  return import("node-llama-cpp");
}

/** The message bus gateway nodes share (NATS): what lets a request on one node reach a worker on another. */
export { connectBus } from "./bus.ts";
export type { Bus } from "./bus.ts";

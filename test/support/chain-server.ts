/**
 * `svc chain serve` in its own process, as the shared chain of gateways that reach it over RPC:
 * its URL, the service keys gateways need, and kill -9 / restart on the same port and data dir.
 */
import { join } from "node:path";
import { startSvc, type SvcProcess } from "../cli/svc-process.ts";
import { tempDir } from "./service.ts";

export interface ChainServer {
  url: string;
  /** The server process's id (it changes with a restart). */
  pid(): number;
  keysDir: string;
  /** kill -9: whatever the chain had not made durable is gone. */
  kill(): Promise<void>;
  /** Ctrl-C: the chain checkpoints everything and exits. */
  stop(): Promise<void>;
  /** Starts it again on the same port and data dir. */
  restart(): Promise<void>;
  close(): Promise<void>;
}

async function start(dataDir: string, port: number, slotMs: number): Promise<{ run: SvcProcess; url: string }> {
  const run = startSvc(["chain", "serve", "--port", String(port), "--data-dir", dataDir, "--slot-ms", String(slotMs)]);
  const url = (await run.waitFor(/^Solana RPC: (http:\/\/127\.0\.0\.1:\d+)$/m, 60_000))[1]!;
  await run.waitFor(/Press Ctrl-C to stop\./);
  return { run, url };
}

/** `slotMs` sets how fast blockhashes expire: 150 slots. */
export async function startChainServer(options: { slotMs?: number } = {}): Promise<ChainServer> {
  const dir = await tempDir("svc-chain-server-");
  const slotMs = options.slotMs ?? 400;
  let current = await start(dir.path, 0, slotMs);
  const url = current.url;
  const port = Number(new URL(url).port);
  const kill = async () => {
    current.run.child.kill("SIGKILL");
    await current.run.exited();
  };
  return {
    url,
    pid: () => current.run.child.pid!,
    keysDir: join(dir.path, "keys"),
    kill,
    stop: async () => {
      current.run.child.kill("SIGINT");
      await current.run.exited();
    },
    restart: async () => {
      current = await start(dir.path, port, slotMs);
    },
    close: async () => {
      await kill();
      await dir.remove();
    },
  };
}

/**
 * A PostgreSQL one network hop away, for benches run on a machine where it is on loopback: a TCP
 * proxy in front of it that holds every chunk `delayMs` in each direction (Node's timers: at least
 * 1 ms). A deployment's database is rarely on the gateway's own host, and there each statement's
 * round trip, not its work, is what a sequential request waits for.
 *
 *   DATABASE_DELAY_MS=1 DATABASE_URL=... node --import tsx bench/job-statements.ts 200 1
 */
import net from "node:net";

export interface DistantDatabase {
  /** DATABASE_URL with the proxy's host and port. */
  url: string;
  close(): Promise<void>;
}

export async function distantDatabase(databaseUrl: string, delayMs: number): Promise<DistantDatabase> {
  const target = new URL(databaseUrl);
  const sockets = new Set<net.Socket>();
  const server = net.createServer((caller) => {
    const database = net.connect(Number(target.port || 5432), target.hostname);
    for (const socket of [caller, database]) {
      sockets.add(socket);
      socket.on("close", () => {
        sockets.delete(socket);
        caller.destroy();
        database.destroy();
      });
      socket.on("error", () => socket.destroy());
    }
    caller.on("data", (chunk) => setTimeout(() => database.write(chunk), delayMs));
    database.on("data", (chunk) => setTimeout(() => caller.write(chunk), delayMs));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const proxied = new URL(databaseUrl);
  proxied.hostname = "127.0.0.1";
  proxied.port = String((server.address() as net.AddressInfo).port);
  return {
    url: proxied.toString(),
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * A worker that floods its gateway, run as its own process (`node --import tsx flooder.ts <origin>`)
 * so its sending does not share the gateway's event loop: it registers (passing the probe), then
 * sends heartbeats as fast as its socket takes them until it is cut off, and starts again. Each
 * connection's end is printed as a JSON line: messages sent and the close code.
 */
import { WebSocket } from "ws";
import { connectRawWorker } from "./raw-worker.ts";

const origin = process.argv[2]!;
const heartbeat = JSON.stringify({ type: "heartbeat" });

for (;;) {
  try {
    const worker = await connectRawWorker(origin);
    await worker.register();
    let sent = 0;
    let open = true;
    void worker.closed.then(() => (open = false));
    while (open && worker.ws.readyState === WebSocket.OPEN) {
      for (let i = 0; i < 500; i++) worker.ws.send(heartbeat);
      sent += 500;
      // Let the socket drain a little so the flood is sustained rather than buffered.
      await new Promise((resolve) => setImmediate(resolve));
    }
    const { code } = await worker.closed;
    console.log(JSON.stringify({ sent, code }));
  } catch {
    // Refused at the door (429) or cut off mid-handshake: try again shortly.
    console.log(JSON.stringify({ refused: true }));
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

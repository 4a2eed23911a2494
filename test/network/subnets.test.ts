/**
 * The network an address counts toward for the worker gateway's limits (worker-limits.ts), and
 * the address it takes from a trusted proxy.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { WebSocket } from "ws";
import { WORKER_CONNECT_PATH } from "../../src/network/protocol.ts";
import { subnetOf } from "../../src/network/worker-limits.ts";
import { migratedTestDb, startTestGateway } from "../support/service.ts";

test("IPv4 addresses count per /24, IPv4 mapped into IPv6 as IPv4, IPv6 per /48", () => {
  assert.equal(subnetOf("203.0.113.7"), "203.0.113.0/24");
  assert.equal(subnetOf("203.0.113.250"), subnetOf("203.0.113.1"));
  assert.notEqual(subnetOf("203.0.114.1"), subnetOf("203.0.113.1"));
  assert.equal(subnetOf("::ffff:203.0.113.7"), "203.0.113.0/24");
  assert.equal(subnetOf("2001:db8:abcd:12::1"), "2001:db8:abcd::/48");
  assert.equal(subnetOf("2001:0db8:abcd:ffff:1:2:3:4"), "2001:db8:abcd::/48");
  assert.equal(subnetOf("2001:db8::1"), "2001:db8:0::/48");
  assert.equal(subnetOf("::1"), "0:0:0::/48");
});

test("behind a trusted proxy, workers' handshakes are counted by the address it forwards", async () => {
  const gateway = await startTestGateway({
    db: await migratedTestDb(),
    trustProxy: ["127.0.0.1"],
    workerLimits: { handshakesPerSecondPerSubnet: 0.01, handshakeBurstPerSubnet: 2 },
  });
  const url = `${gateway.service.origin.replace(/^http/, "ws")}${WORKER_CONNECT_PATH}`;
  /** The upgrade's status for a connection the proxy says came from `client`. */
  const handshake = (client: string) =>
    new Promise<number>((resolve) => {
      const ws = new WebSocket(url, { headers: { "x-forwarded-for": client } });
      ws.once("open", () => (ws.terminate(), resolve(101)));
      ws.once("unexpected-response", (_request, response) => (ws.terminate(), resolve(response.statusCode ?? 0)));
      ws.once("error", () => undefined);
    });
  try {
    const fromOneSubnet = [await handshake("203.0.113.1"), await handshake("203.0.113.2"), await handshake("203.0.113.3")];
    assert.deepEqual(fromOneSubnet, [101, 101, 429], "a subnet's burst is spent");
    assert.equal(await handshake("198.51.100.1"), 101, "another subnet behind the same proxy is not held up");
  } finally {
    await gateway.close();
  }
});

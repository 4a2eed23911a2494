/** Which addresses a webhook may reach: public only, loopback as its own class, IPv4 inside IPv6 judged as IPv4. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { classifyAddress } from "../../src/events/address-policy.ts";

const cases: [string, ReturnType<typeof classifyAddress>][] = [
  ["8.8.8.8", "public"],
  ["93.184.216.34", "public"],
  ["2606:4700:4700::1111", "public"],
  ["::ffff:8.8.8.8", "public"],
  ["127.0.0.1", "loopback"],
  ["127.255.0.9", "loopback"],
  ["::1", "loopback"],
  ["[::1]", "loopback"],
  ["::ffff:127.0.0.1", "loopback"],
  ["::ffff:7f00:1", "loopback"],
  ["0:0:0:0:0:ffff:7f00:0001", "loopback"],
  ["10.0.0.1", "private"],
  ["172.16.5.4", "private"],
  ["172.31.255.255", "private"],
  ["192.168.1.1", "private"],
  ["100.64.0.1", "private"],
  ["169.254.169.254", "private"],
  ["0.0.0.0", "private"],
  ["255.255.255.255", "private"],
  ["224.0.0.1", "private"],
  ["::ffff:10.0.0.1", "private"],
  ["::ffff:a9fe:a9fe", "private"],
  ["64:ff9b::a00:1", "private"],
  ["2002:a9fe:a9fe::1", "private"],
  ["::", "private"],
  ["::10.0.0.1", "private"],
  ["fe80::1", "private"],
  ["fe80::1%eth0", "private"],
  ["fd12:3456::1", "private"],
  ["fc00::1", "private"],
  ["ff02::1", "private"],
  ["2001:db8::1", "private"],
  ["not-an-ip", "private"],
];

test("addresses are classified as public, loopback or private", () => {
  for (const [address, expected] of cases) assert.equal(classifyAddress(address), expected, address);
});

test("the edges of private ranges are exact", () => {
  assert.equal(classifyAddress("172.15.255.255"), "public");
  assert.equal(classifyAddress("172.32.0.0"), "public");
  assert.equal(classifyAddress("100.63.255.255"), "public");
  assert.equal(classifyAddress("100.128.0.0"), "public");
  assert.equal(classifyAddress("11.0.0.0"), "public");
});

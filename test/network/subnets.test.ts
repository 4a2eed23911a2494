/** The network an address counts toward for the worker gateway's limits (worker-limits.ts). */
import assert from "node:assert/strict";
import { test } from "node:test";
import { subnetOf } from "../../src/network/worker-limits.ts";

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

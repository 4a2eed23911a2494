/**
 * Webhook URLs are judged on what their host resolves to. Names are resolved, never called: the
 * staged answers stand in for DNS servers that could otherwise not be made to answer this way.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parseTargetUrl, resolveTarget, systemResolver, TargetRefusedError, type Resolver, type TargetPolicy } from "../../src/events/target.ts";

const staged =
  (answers: Record<string, string[]>): Resolver =>
  async (host) =>
    (answers[host] ?? []).map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));

const strict: TargetPolicy = { allowHttpLocalhost: false, allowLoopback: false, resolve: systemResolver };

async function refused(raw: string, policy: TargetPolicy): Promise<string> {
  try {
    await resolveTarget(parseTargetUrl(raw, policy), policy);
  } catch (err) {
    assert.ok(err instanceof TargetRefusedError, String(err));
    return err.message;
  }
  assert.fail(`${raw} was accepted`);
}

describe("webhook targets", () => {
  test("https only, no credentials", async () => {
    assert.match(await refused("http://example.com/hook", strict), /https/);
    assert.match(await refused("ftp://example.com/hook", strict), /https/);
    assert.match(await refused("not a url", strict), /valid/);
    assert.match(await refused("https://user:pw@example.com/hook", strict), /credentials/);
  });

  test("loopback, private and link-local addresses are refused, in every spelling", async () => {
    for (const url of [
      "https://127.0.0.1/hook",
      "https://10.0.0.1/hook",
      "https://[::1]/hook",
      "https://169.254.169.254/latest/meta-data",
      "https://[::ffff:127.0.0.1]/hook",
      "https://[::ffff:10.0.0.1]/hook",
      "https://[fe80::1]/hook",
      "https://0x7f.1/hook",
      "https://2130706433/hook",
      "https://192.168.0.1:8443/hook",
    ]) {
      assert.match(await refused(url, strict), /private, loopback or link-local/, url);
    }
  });

  test("a name resolving to loopback is refused (localhost, resolved by the system)", async () => {
    assert.match(await refused("https://localhost/hook", strict), /localhost resolves to/);
  });

  test("one bad address among several refuses the name; an unresolvable name is refused", async () => {
    const policy = { ...strict, resolve: staged({ "mixed.test": ["93.184.216.34", "10.1.2.3"], "public.test": ["93.184.216.34", "2606:4700::1"] }) };
    assert.match(await refused("https://mixed.test/hook", policy), /10\.1\.2\.3/);
    assert.match(await refused("https://nowhere.test/hook", policy), /could not be resolved/);
    assert.deepEqual(
      (await resolveTarget(parseTargetUrl("https://public.test/hook", policy), policy)).map((a) => a.address),
      ["93.184.216.34", "2606:4700::1"],
    );
  });

  test("tests may allow loopback over https; private stays refused", async () => {
    const policy = { ...strict, allowLoopback: true, resolve: staged({ "receiver.test": ["127.0.0.1"], "lan.test": ["192.168.1.5"] }) };
    assert.equal((await resolveTarget(parseTargetUrl("https://receiver.test/h", policy), policy))[0]!.address, "127.0.0.1");
    assert.equal((await resolveTarget(parseTargetUrl("https://[::1]/h", policy), policy))[0]!.address, "::1");
    assert.match(await refused("https://lan.test/h", policy), /192\.168\.1\.5/);
    assert.match(await refused("http://127.0.0.1/h", policy), /https/);
  });

  test("the development exception: http://localhost reaches loopback only", async () => {
    const dev = { ...strict, allowHttpLocalhost: true };
    const ok = await resolveTarget(parseTargetUrl("http://localhost:3000/hook", dev), dev);
    assert.ok(ok.length > 0);
    await resolveTarget(parseTargetUrl("http://127.0.0.1:3000/hook", dev), dev);
    assert.match(await refused("http://example.com/hook", dev), /https/);
    assert.match(await refused("https://localhost/hook", dev), /resolves to/);
    const rebound = { ...dev, resolve: staged({ localhost: ["93.184.216.34"] }) };
    assert.match(await refused("http://localhost/hook", rebound), /93\.184\.216\.34/);
  });
});

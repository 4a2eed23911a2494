/**
 * A throwaway self-signed certificate for test HTTPS servers on loopback, made with the openssl
 * CLI once per test process. It names localhost, receiver.test, 127.0.0.1 and ::1; services under
 * test are told to trust it explicitly.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

export interface TestCert {
  cert: string;
  key: string;
}

let made: Promise<TestCert> | undefined;

export function testCert(): Promise<TestCert> {
  made ??= (async () => {
    const dir = await mkdtemp(join(tmpdir(), "svc-cert-"));
    try {
      await promisify(execFile)("openssl", [
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem"), "-days", "1", "-subj", "/CN=localhost",
        "-addext", "subjectAltName=DNS:localhost,DNS:receiver.test,IP:127.0.0.1,IP:::1",
      ]);
      return { cert: await readFile(join(dir, "cert.pem"), "utf8"), key: await readFile(join(dir, "key.pem"), "utf8") };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  })();
  return made;
}

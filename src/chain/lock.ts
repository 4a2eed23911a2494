/**
 * One process at a time may own a chain data dir: two writers appending to the same log would
 * interleave records and corrupt both chains. A lock left by a process that died (kill -9) is
 * taken over, since its pid is no longer alive.
 */
import { closeSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

const held = new Set<string>();

export function acquireLock(path: string): () => void {
  if (held.has(path)) throw new Error(`${path}: this chain data dir is already open in this process`);
  for (let attempt = 0; ; attempt++) {
    try {
      const fd = openSync(path, "wx", 0o600);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST" || attempt > 0) throw err;
      const pid = Number(readFileSync(path, "utf8"));
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && alive(pid)) {
        throw new Error(`${path}: chain data dir is in use by process ${pid}`);
      }
      rmSync(path, { force: true });
    }
  }
  held.add(path);
  return () => {
    held.delete(path);
    rmSync(path, { force: true });
  };
}

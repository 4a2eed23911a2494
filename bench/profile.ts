/** A CPU profile of the calling thread from the inspector's profiler, saved where Chrome's DevTools can open it. */
import { writeFile } from "node:fs/promises";
import { Session } from "node:inspector/promises";

export async function startProfile(): Promise<{ save(path: string): Promise<void> }> {
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.start");
  return {
    async save(path) {
      const { profile } = await session.post("Profiler.stop");
      await writeFile(path, JSON.stringify(profile));
      session.disconnect();
    },
  };
}

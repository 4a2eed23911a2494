/**
 * A fixed set of reusable slots (context sequences) handed out first come, first served. A request
 * that finds none free waits in line; aborting its signal takes it out of the line.
 */
export class SequencePool<T> {
  private readonly free: T[];
  private readonly waiting: Array<{ grant: (item: T) => void; fail: (error: Error) => void }> = [];
  private closedWith: Error | undefined;

  constructor(items: readonly T[]) {
    this.free = [...items];
  }

  get freeCount(): number {
    return this.free.length;
  }

  get waitingCount(): number {
    return this.waiting.length;
  }

  /** Resolves with a slot, or with null if `signal` aborts first; rejects once the pool is closed. */
  acquire(signal?: AbortSignal): Promise<T | null> {
    if (this.closedWith) return Promise.reject(this.closedWith);
    if (signal?.aborted) return Promise.resolve(null);
    const item = this.free.pop();
    if (item !== undefined) return Promise.resolve(item);
    return new Promise((resolve, reject) => {
      const settle = () => {
        signal?.removeEventListener("abort", onAbort);
        const i = this.waiting.indexOf(waiter);
        if (i >= 0) this.waiting.splice(i, 1);
      };
      const waiter = {
        grant: (granted: T) => {
          settle();
          resolve(granted);
        },
        fail: (error: Error) => {
          settle();
          reject(error);
        },
      };
      const onAbort = () => {
        settle();
        resolve(null);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiting.push(waiter);
    });
  }

  release(item: T): void {
    const next = this.waiting[0];
    if (next) next.grant(item);
    else this.free.push(item);
  }

  /** Fails every waiter and every later acquire with `error`. */
  close(error: Error): void {
    this.closedWith = error;
    for (const waiter of [...this.waiting]) waiter.fail(error);
  }
}

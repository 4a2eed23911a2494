/**
 * A single-consumer async queue. A job runs on its own and pushes events here, so its progress,
 * settlement and refunds never depend on how (or whether) the HTTP side reads them.
 */
export class Channel<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private waiting: ((result: IteratorResult<T>) => void) | undefined;
  private rejectWaiting: ((error: unknown) => void) | undefined;
  private closed = false;
  private failure: { error: unknown } | undefined;

  /** `onClose` is told once, when the stream ends. */
  constructor(private readonly onClose?: () => void) {}

  push(item: T): void {
    if (this.closed) return;
    if (this.waiting) {
      const resolve = this.waiting;
      this.waiting = this.rejectWaiting = undefined;
      resolve({ value: item, done: false });
    } else {
      this.items.push(item);
    }
  }

  /** End the stream; with an error, the consumer's next read throws it after the queued items. */
  close(error?: unknown): void {
    if (this.closed) return;
    this.closed = true;
    this.onClose?.();
    if (error !== undefined) this.failure = { error };
    if (this.waiting) {
      const resolve = this.waiting;
      const reject = this.rejectWaiting!;
      this.waiting = this.rejectWaiting = undefined;
      if (this.failure) reject(this.failure.error);
      else resolve({ value: undefined, done: true });
    }
  }

  next(): Promise<IteratorResult<T>> {
    if (this.items.length > 0) return Promise.resolve({ value: this.items.shift()!, done: false });
    if (this.closed) return this.failure ? Promise.reject(this.failure.error) : Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => {
      this.waiting = resolve;
      this.rejectWaiting = reject;
    });
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return { next: () => this.next() };
  }
}

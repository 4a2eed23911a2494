/**
 * Items gathered into batches by key: a batch is handed over `lingerMs` after its first item, or
 * at once when it holds `max` items, and each item's promise settles with its own part of what
 * the batch's handler gives back (or with the handler's error, for every item of the batch).
 */
export class LingeringBatches<T, R> {
  private readonly filling = new Map<string, { items: T[]; settle: { resolve(r: R): void; reject(e: unknown): void }[]; timer: NodeJS.Timeout }>();

  constructor(
    /** One result per item, in the items' order. */
    private readonly handle: (items: readonly T[]) => Promise<R[]>,
    private readonly lingerMs: number,
    private readonly max: number,
  ) {}

  add(key: string, item: T): Promise<R> {
    return new Promise((resolve, reject) => {
      let batch = this.filling.get(key);
      if (!batch) {
        batch = { items: [], settle: [], timer: setTimeout(() => this.close(key), this.lingerMs) };
        this.filling.set(key, batch);
      }
      batch.items.push(item);
      batch.settle.push({ resolve, reject });
      if (batch.items.length >= this.max) this.close(key);
    });
  }

  /** Hands over every batch filling now. */
  flush(): void {
    for (const key of [...this.filling.keys()]) this.close(key);
  }

  private close(key: string): void {
    const batch = this.filling.get(key);
    if (!batch) return;
    this.filling.delete(key);
    clearTimeout(batch.timer);
    this.handle(batch.items).then(
      (results) => batch.settle.forEach((s, i) => s.resolve(results[i]!)),
      (error: unknown) => batch.settle.forEach((s) => s.reject(error)),
    );
  }
}

/** The middle of `values` (the mean of the two middle ones for an even count); null when empty. */
export function median(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** The latest `size` measurements of something, newest last. */
export class RecentSamples {
  private readonly values: number[] = [];

  constructor(private readonly size: number) {}

  add(value: number): void {
    this.values.push(value);
    if (this.values.length > this.size) this.values.shift();
  }

  all(): readonly number[] {
    return this.values;
  }

  /** The median of the latest `count` (all by default); null before the first. */
  median(count = this.size): number | null {
    return median(this.values.slice(-count));
  }
}

/** A Map that forgets its oldest entries past `limit`; what it holds is cheap to recompute. */
export class BoundedMap<V> extends Map<string, V> {
  constructor(private readonly limit: number) {
    super();
  }
  override set(key: string, value: V): this {
    if (this.size >= this.limit) this.delete(this.keys().next().value!);
    return super.set(key, value);
  }
}

// key → set of values, empty sets dropped: the building block of the handover engine's indexes.
export class SetMap<V> {
  private readonly sets = new Map<string, Set<V>>();

  add(key: string, value: V): void {
    let set = this.sets.get(key);
    if (!set) {
      set = new Set<V>();
      this.sets.set(key, set);
    }
    set.add(value);
  }

  delete(key: string, value: V): void {
    const set = this.sets.get(key);
    if (!set) return;
    set.delete(value);
    if (set.size === 0) this.sets.delete(key);
  }

  /** The values under `key`, in the order they were added. */
  get(key: string): readonly V[] {
    return [...(this.sets.get(key) ?? [])];
  }
}

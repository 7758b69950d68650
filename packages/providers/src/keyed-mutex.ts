/**
 * Serialises async work per key (per path): work on one key runs one at a time,
 * in the order it was queued; different keys run in parallel.
 */
export class KeyedMutex {
  private readonly tails = new Map<string, Promise<unknown>>();

  async run<T>(keys: readonly string[], work: () => Promise<T>): Promise<T> {
    const unique = [...new Set(keys)].sort();
    const previous = unique.map((k) => this.tails.get(k) ?? Promise.resolve());
    let release!: () => void;
    const done = new Promise<void>((resolve) => (release = resolve));
    for (const k of unique) this.tails.set(k, done);
    try {
      await Promise.all(previous.map((p) => p.catch(() => undefined)));
      return await work();
    } finally {
      release();
      for (const k of unique) if (this.tails.get(k) === done) this.tails.delete(k);
    }
  }
}

/**
 * The bundles on their way (upload-bundle.ts), kept by the push across its windows of
 * creates (issue #16): at a window's end the push no longer waits for every bundle's answer
 * before it makes the next window's folders and reads its files — on a first sync the scan
 * hands the push a window at a time, and each turn stopped the stream for the server's last
 * answer, the folders' request and the first bundle's reads (~2 s a turn on a loaded machine).
 *
 * A queued put on its way is not sent again (`has`); a path on its way holds back the next
 * use of it (`holds`: the bundle upload settles first); what may depend on a file on its way —
 * a delete, a move, the end of the push — waits for `settle()`.
 */
export class BundleFlight {
  /** Oldest first; each one's outcomes are recorded when its `done` resolves. */
  private sending: { done: Promise<void>; paths: Set<string>; ids: readonly number[] }[] = [];
  private readonly ids = new Set<number>();
  /** Bundles sent and not yet answered (and their outcomes recorded). */
  unanswered = 0;

  /** Bundles on their way (answered ones included until settled). */
  get size(): number {
    return this.sending.length;
  }

  /** Whether the queue entry `id` is in a bundle on its way. */
  has(id: number): boolean {
    return this.ids.has(id);
  }

  /** Whether `path` is in a bundle on its way. */
  holds(path: string): boolean {
    return this.sending.some((s) => s.paths.has(path));
  }

  /** A bundle sent: `done` settles once its outcomes are recorded (it is observed here). */
  add(done: Promise<void>, paths: Set<string>, ids: readonly number[]): void {
    this.unanswered += 1;
    // Observed here; thrown by settle() or settleOldest().
    done.then(
      () => (this.unanswered -= 1),
      () => (this.unanswered -= 1),
    );
    for (const id of ids) this.ids.add(id);
    this.sending.push({ done, paths, ids });
  }

  /** Wait for every bundle on its way; the first failure is thrown once all have settled. */
  async settle(): Promise<void> {
    const all = this.sending;
    this.sending = [];
    const settled = await Promise.allSettled(all.map((s) => s.done));
    for (const s of all) this.forget(s.ids);
    const failed = settled.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  /** Wait for the oldest bundle on its way (its failure thrown after the others settle). */
  async settleOldest(): Promise<void> {
    const oldest = this.sending[0];
    if (!oldest) return;
    try {
      await oldest.done;
    } catch (e) {
      await this.settle().catch(() => undefined);
      throw e;
    }
    this.sending = this.sending.filter((s) => s !== oldest);
    this.forget(oldest.ids);
  }

  private forget(ids: readonly number[]): void {
    for (const id of ids) this.ids.delete(id);
  }
}

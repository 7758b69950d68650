/**
 * Wakes a namespace's change-feed listeners when its feed grows. Writes by a device wake
 * them at once; a batch written only by the mirror wakes them at most every `batchMs`
 * (CoCloud's periodic, batched notifications), not once per file.
 */
import { EventEmitter } from 'node:events';
import type { ChangeRecord } from '@weft/wire';
import type { MetadataStore } from './store/metadata.ts';

export class ChangeHub {
  private readonly hub = new EventEmitter();
  private readonly batched = new Map<string, NodeJS.Timeout>();

  constructor(
    private readonly o: {
      meta: MetadataStore;
      batchMs: number;
      /** Whether a record was written by the mirror (its wake-ups are batched). */
      isMirror: (r: ChangeRecord) => boolean;
    },
  ) {
    this.hub.setMaxListeners(0);
  }

  /** Records were written to `userId`'s feed. */
  notify(userId: string, records: readonly ChangeRecord[]): void {
    const mirrorOnly = records.every((r) => this.o.isMirror(r));
    if (!mirrorOnly || this.o.batchMs === 0) return void this.hub.emit(key(userId));
    if (this.batched.has(userId)) return;
    this.batched.set(
      userId,
      setTimeout(() => {
        this.batched.delete(userId);
        this.hub.emit(key(userId));
      }, this.o.batchMs),
    );
  }

  /** Another process recorded changes in `userId`'s feed (MetadataStore.watchChanges): wake at once. */
  wake(userId: string): void {
    this.hub.emit(key(userId));
  }

  /** Call `listener` whenever `userId`'s feed grows; the returned function stops it. */
  listen(userId: string, listener: () => void): () => void {
    this.hub.on(key(userId), listener);
    return () => this.hub.off(key(userId), listener);
  }

  /** Resolves once `userId`'s feed is past `seq`, or `signal` aborts. */
  waitForSeq(userId: string, seq: number, signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      let done = false;
      const finish = (): void => {
        if (done) return;
        done = true;
        stop();
        signal.removeEventListener('abort', check);
        resolve();
      };
      const check = (): void => {
        if (signal.aborted) return finish();
        // A failed read ends the wait too: the caller reads the feed again and sees.
        this.o.meta.currentSeq(userId).then((cur) => {
          if (cur > seq) finish();
        }, finish);
      };
      const stop = this.listen(userId, check);
      signal.addEventListener('abort', check);
      check();
    });
  }

  close(): void {
    for (const t of this.batched.values()) clearTimeout(t);
    this.batched.clear();
  }
}

/** A user's event name (prefixed: a user named "error" must not be EventEmitter's error event). */
function key(userId: string): string {
  return `changes:${userId}`;
}

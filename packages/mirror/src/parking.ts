/**
 * Removing a folder the engine emptied without losing a save that lands in it at that
 * instant: the clouds delete a folder with whatever is in it, and none can refuse a
 * non-empty one. Where the provider moves folders, the folder is renamed to a hidden name
 * beside it (one server-side move: a save racing it lands either at the old path,
 * untouched, or inside the hidden folder), and settle() removes it later, once a save
 * already on its way would have landed, or puts back what arrived. Elsewhere: list, then
 * remove.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { hasServerSideMove } from '@weft/providers';
import type { Clock } from './clock.ts';
import type { MirrorStats, Replica } from './context.ts';
import { isAlreadyExists, isNotFound } from './provider-failures.ts';
import { fullPath, relativePath } from './replica-view.ts';
import type { ShareStore } from './store.ts';

/** A folder being removed is first renamed to this prefix + random hex (removeEmptyFolder). */
const PARKED_PREFIX = '.weft-removing-';

/**
 * The hidden name a folder named `name` is set aside under: the prefix, random hex, and
 * the name itself when short enough (so an engine that stopped before settling it can
 * still put back a save that landed in it).
 */
function parkedName(name: string): string {
  const tag = `${PARKED_PREFIX}${randomBytes(6).toString('hex')}`;
  return Buffer.byteLength(name) <= 200 ? `${tag}-${name}` : tag;
}

/** The original name kept in a hidden name (parkedName), if any. */
function parkedOriginalName(hidden: string): string | undefined {
  if (!hidden.startsWith(PARKED_PREFIX)) return undefined;
  const m = /^[0-9a-f]{12}-(.+)$/su.exec(hidden.slice(PARKED_PREFIX.length));
  return m?.[1];
}

/** A folder the engine set aside for removal (its hidden name; not below another). */
export function isParkedFolder(rel: string): boolean {
  const segs = rel.split('/');
  return segs.findIndex((s) => s.startsWith(PARKED_PREFIX)) === segs.length - 1;
}

/** Inside a folder the engine is removing: not part of the share, never ingested. */
export function isParked(rel: string): boolean {
  return rel.split('/').some((s) => s.startsWith(PARKED_PREFIX));
}

/** A folder set aside under a hidden name (`parked`) to be removed from `full` on `replica`. */
interface Parked {
  readonly replica: Replica;
  readonly rel: string;
  /** Where it is put back if a save arrived; undefined: left by an engine that stopped. */
  readonly full: string | undefined;
  readonly parked: string;
  /** The clock's time when it was set aside. */
  readonly at: number;
}

export interface ParkingOptions {
  readonly store: ShareStore;
  readonly log: Logger;
  readonly now: Clock;
  readonly stats: MirrorStats;
  /** How long a folder stays set aside before it is removed (see MirrorEngineOptions). */
  readonly settleMs: number;
}

async function isEmptyFolder(t: Replica, path: string): Promise<boolean> {
  for await (const e of t.provider.list(path)) {
    void e;
    return false;
  }
  return true;
}

export class Parking {
  /** Folders set aside for removal (removeEmptyFolder), settled by settle(). */
  private parked: Parked[] = [];

  constructor(private readonly o: ParkingOptions) {}

  /** Folders set aside and not yet settled. */
  get count(): number {
    return this.parked.length;
  }

  /**
   * Remove the folder `rel` on `t` if it is empty (see the file's comment). false: it was
   * not empty (it stays).
   */
  async removeEmptyFolder(t: Replica, rel: string): Promise<boolean> {
    const full = fullPath(t, rel);
    const done = async (): Promise<true> => {
      await this.o.store.touch(t.id, rel);
      this.o.stats.applied += 1;
      return true;
    };
    try {
      if (!(await isEmptyFolder(t, full))) return false;
      const p = t.provider;
      if (!hasServerSideMove(p) || p.features.move !== 'files-and-folders') {
        await p.remove(full);
        return await done();
      }
      const slash = full.lastIndexOf('/');
      const parked = `${full.slice(0, slash + 1)}${parkedName(full.slice(slash + 1))}`;
      await p.move(full, parked);
      this.parked.push({ replica: t, rel, full, parked, at: this.o.now() });
      return await done();
    } catch (e) {
      if (isNotFound(e)) return true;
      throw e;
    }
  }

  /**
   * A hidden folder an engine set aside and did not settle (it stopped), found by a
   * listing: removed if empty, else put back under the name it had (kept in the hidden name).
   */
  adopt(r: Replica, rel: string, full: string): void {
    if (this.parked.some((x) => x.replica === r && x.parked === full)) return;
    const slash = full.lastIndexOf('/');
    const name = parkedOriginalName(full.slice(slash + 1));
    const back = name === undefined ? undefined : `${full.slice(0, slash + 1)}${name}`;
    const relBack = back === undefined ? rel : (relativePath(r, back) ?? rel);
    this.parked.push({ replica: r, rel: relBack, full: back, parked: full, at: this.o.now() });
  }

  /**
   * Remove the folders set aside at least settleMs ago (`all`: every one) that are still
   * empty; put back what arrived in the others (it is then in the feed, a new change at the
   * old path, and reaches everyone). Returns how many were settled.
   */
  async settle(all: boolean): Promise<number> {
    const due = this.parked.filter((x) => all || this.o.now() - x.at >= this.o.settleMs);
    let n = 0;
    for (const x of due) {
      await this.settleOne(x);
      this.parked = this.parked.filter((y) => y !== x);
      n += 1;
    }
    return n;
  }

  private async settleOne(x: Parked): Promise<void> {
    const p = x.replica.provider;
    if (!hasServerSideMove(p)) return;
    try {
      if (await isEmptyFolder(x.replica, x.parked)) {
        await p.remove(x.parked);
        return;
      }
      if (x.full === undefined) {
        this.o.log.warn(
          { replica: x.replica.id, path: x.rel },
          'a folder set aside for removal by an earlier run holds files: left where it is',
        );
        return;
      }
      // Someone saved into it after it was set aside: put it all back.
      try {
        await p.move(x.parked, x.full);
      } catch (e) {
        if (!isAlreadyExists(e)) throw e;
        // The old path was taken again meanwhile: move what is inside back one by one.
        const inside: string[] = [];
        for await (const e2 of p.list(x.parked)) inside.push(e2.path);
        for (const i of inside) await p.move(i, `${x.full}/${i.slice(x.parked.length + 1)}`);
        await p.remove(x.parked);
      }
      this.o.log.info(
        { replica: x.replica.id, path: x.rel },
        'a folder being removed received a save: put back',
      );
    } catch (e) {
      if (!isNotFound(e)) throw e; // else someone removed it meanwhile
    }
  }
}

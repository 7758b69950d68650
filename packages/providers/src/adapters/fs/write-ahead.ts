/**
 * The filesystem tier's write-ahead log, wired into the provider (`FsProviderOptions.batchLog`):
 * opened, and replayed after a crash, before anything reads the tier; consulted by every
 * other mutation before it touches a path (`beforeTouch`: checkpoint first when the log holds
 * that path, so a replay never undoes the mutation); handed to the batch write (write-many.ts).
 * The log itself — its segments, syncs, checkpoints and replay order — is batch-log.ts.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { BatchLog, type BatchLogItem, type BatchLogOptions, type BatchLogStats } from './batch-log.ts';
import { type BatchTarget, type WriteManyItem, writeMany } from './write-many.ts';

/** What the log's wiring needs of the provider. */
export interface WriteAheadHost {
  /** The tier's real root (the filesystem the checkpoint syncs). */
  readonly realRoot: string;
  readonly fileMode: number;
  readonly dirMode: number;
  /** A provider path to its absolute path; throws on a path the provider refuses. */
  resolve(p: string): string;
  /** The batch write's target, without the log (a replay writes with an fsync per file). */
  unloggedTarget(): BatchTarget;
}

export class WriteAhead {
  private constructor(readonly log: BatchLog) {}

  /** Open the log in `dir`, replaying what a crash left (see replay). */
  static async open(dir: string, host: WriteAheadHost, options: BatchLogOptions): Promise<WriteAhead> {
    const log = await BatchLog.open(
      dir,
      host.realRoot,
      host.fileMode,
      host.dirMode,
      (items) => replay(host, items),
      options,
    );
    return new WriteAhead(log);
  }

  /** What the log counted. */
  get stats(): Readonly<BatchLogStats> {
    return this.log.stats;
  }

  /**
   * Before a mutation (write, remove, move, copy) of these paths (lock keys): a logged batch
   * holding one of them, or a file under one, is checkpointed first.
   */
  beforeTouch(keys: readonly string[]): Promise<void> {
    return this.log.settle(keys);
  }

  /** Checkpoint what is logged (the provider's close). */
  close(): Promise<void> {
    return this.log.close();
  }
}

/**
 * A logged batch again, at open after a crash: each file whose bytes on disk differ is
 * written (fsynced, as without the log); one that cannot be (a folder in the way) is left.
 */
async function replay(
  host: WriteAheadHost,
  items: BatchLogItem[],
): Promise<{ written: number; abs: string[] }> {
  const abs: string[] = [];
  const todo: WriteManyItem[] = [];
  for (const it of items) {
    let a: string;
    try {
      a = host.resolve(it.path);
    } catch {
      continue;
    }
    abs.push(a);
    const same = await fsp
      .readFile(a)
      .then((b) => b.equals(it.bytes))
      .catch(() => false);
    if (!same) todo.push(it);
  }
  const out = todo.length > 0 ? await writeMany(host.unloggedTarget(), todo) : [];
  return { written: out.filter((r) => !(r instanceof Error)).length, abs };
}

/** The log's folder in the provider's state folder. */
export function writeAheadDir(stateDir: string): string {
  return nodePath.join(stateDir, 'batch-log');
}

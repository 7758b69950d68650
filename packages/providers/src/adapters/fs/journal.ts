/**
 * The filesystem tier's change feed: a journal of the changes this provider made, one JSON
 * line each in `.weft-fs/changes.jsonl`, appended in order after each change (a torn last
 * line from a crash is skipped on load: its change is on disk, only the notification is
 * lost). Past `maxJournal` lines the older half is dropped by an atomic rewrite, and cursors
 * older than what is kept get `reset`. Cursors are sequence numbers behind `fs1:`.
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import type { Change, ChangePage, Entry } from '../../provider.ts';
import { parseSeqCursor } from '../memory.ts';

const CURSOR_PREFIX = 'fs1:';

export interface JournalLine {
  s: number;
  t: 'u' | 'd';
  p: string;
  e?: Entry;
}

export class FsJournal {
  private lines: JournalLine[] = [];
  private seq = 0;
  private appending: Promise<void> = Promise.resolve();
  /** Lines recorded and not yet appended (one append takes them all). */
  private waiting: string[] = [];
  /** The whole journal to write instead of appending, after a compaction. */
  private rewrite: string | undefined;
  private scheduled = false;

  constructor(
    private readonly file: string,
    private readonly tmpDir: string,
    private readonly fileMode: number,
    private readonly maxLines: number,
  ) {}

  /** Read the journal from disk; returns its lines (oldest first). */
  async load(): Promise<readonly JournalLine[]> {
    let text = '';
    try {
      text = await fsp.readFile(this.file, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
    const lines: JournalLine[] = [];
    for (const raw of text.split('\n')) {
      if (raw === '') continue;
      try {
        lines.push(JSON.parse(raw) as JournalLine);
      } catch {
        // A torn last line from a crash mid-append: the change it described was already on
        // disk, so only the notification is lost; listings still show it.
      }
    }
    this.lines = lines;
    this.seq = lines.at(-1)?.s ?? 0;
    return lines;
  }

  record(change: Change): void {
    this.seq += 1;
    const line: JournalLine =
      change.type === 'upsert'
        ? { s: this.seq, t: 'u', p: change.path, e: change.entry }
        : { s: this.seq, t: 'd', p: change.path };
    this.lines.push(line);
    const max = this.maxLines;
    const compact = this.lines.length > max;
    if (compact) this.lines.splice(0, this.lines.length - Math.floor(max / 2));
    if (compact) {
      // The rewrite holds every line kept, those still waiting to be appended included.
      this.rewrite = this.lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
      this.waiting = [];
    } else this.waiting.push(JSON.stringify(line) + '\n');
    this.schedule();
  }

  /**
   * One write for everything recorded meanwhile (issue #16: a bundle of 1,000 files recorded
   * 1,000 changes, each its own open, append and close), in record order.
   */
  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    this.appending = this.appending.then(async () => {
      this.scheduled = false;
      const rewrite = this.rewrite;
      const text = this.waiting.join('');
      this.rewrite = undefined;
      this.waiting = [];
      if (rewrite !== undefined) await atomicWriteText(this.file, rewrite + text, this.tmpDir, this.fileMode);
      else if (text !== '') await fsp.appendFile(this.file, text, { mode: this.fileMode });
    });
  }

  latestCursor(): string {
    return CURSOR_PREFIX + this.seq;
  }

  async changes(cursor: string, options: { limit?: number } = {}): Promise<ChangePage> {
    await this.appending;
    const after = parseSeqCursor(cursor, CURSOR_PREFIX);
    const oldest = this.lines[0]?.s ?? this.seq + 1;
    if (after === undefined || after > this.seq || after < oldest - 1) {
      return { changes: [], cursor: CURSOR_PREFIX + this.seq, hasMore: false, reset: true };
    }
    const limit = options.limit ?? 1000;
    const start = this.lines.findIndex((l) => l.s > after);
    const page = start < 0 ? [] : this.lines.slice(start, start + limit);
    const last = page.at(-1)?.s ?? after;
    return {
      changes: page.map((l): Change =>
        l.t === 'u' && l.e ? { type: 'upsert', path: l.p, entry: l.e } : { type: 'delete', path: l.p },
      ),
      cursor: CURSOR_PREFIX + last,
      hasMore: last < this.seq,
      reset: false,
    };
  }

  /** Every recorded change is on disk. */
  flushed(): Promise<void> {
    return this.appending;
  }
}

async function atomicWriteText(file: string, text: string, tmpDir: string, mode: number): Promise<void> {
  const tmp = nodePath.join(tmpDir, randomBytes(12).toString('hex'));
  await fsp.writeFile(tmp, text, { flush: true, mode });
  await fsp.rename(tmp, file);
}

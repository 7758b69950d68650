/** What a store write answers with, from the change records it made. */
import type { ChangeRecord, EntryInfo } from '@weft/wire';

/** The seq of an operation that changed nothing (no change record). */
export const NOOP_SEQ = 0;

/** The last record's entry (absent for a delete) and seq; NOOP_SEQ when there is none. */
export function lastEntry(records: ChangeRecord[]): { entry?: EntryInfo; seq: number } {
  const last = records.at(-1);
  if (!last) return { seq: NOOP_SEQ };
  return last.type === 'delete' ? { seq: last.seq } : { entry: last.entry, seq: last.seq };
}

/**
 * The journal's `selection` table (sql/005): the folders this device leaves out, each with
 * its state (selection.ts). Read once when the engine opens, written as the choice changes
 * (selective-sync.ts), so a restart keeps the choice and a removal under way.
 */
import type { SelectionState } from '../selection.ts';
import type { Journal } from './journal.ts';

/** Every left-out folder and its state, by path. */
export function loadSelection(journal: Journal): [string, SelectionState][] {
  const rows = journal.db.prepare('SELECT path, state FROM selection ORDER BY path').all() as {
    path: string;
    state: SelectionState;
  }[];
  return rows.map((r) => [r.path, r.state]);
}

/** Replace the whole choice (one transaction). */
export function replaceSelection(journal: Journal, next: ReadonlyMap<string, SelectionState>): void {
  journal.transaction(() => {
    journal.db.prepare('DELETE FROM selection').run();
    const put = journal.db.prepare('INSERT INTO selection (path, state) VALUES (?, ?)');
    for (const [p, s] of next) put.run(p, s);
  });
}

/** Set one folder's state, or (undefined) take it off the list. */
export function setSelectionState(journal: Journal, p: string, state: SelectionState | undefined): void {
  if (state === undefined) journal.db.prepare('DELETE FROM selection WHERE path = ?').run(p);
  else journal.db.prepare('INSERT OR REPLACE INTO selection (path, state) VALUES (?, ?)').run(p, state);
}

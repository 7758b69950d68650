/**
 * The journal's index as a scan reads it while it walks (scanner.ts): the rows directly in
 * one folder, compared with the folder's entries as soon as they are stat'ed, so an entry
 * that matches its row is let go at once — a no-change rescan holds nothing per file (issue
 * #16: the walk's 100,000 entries, held until the whole index was read after it, were most
 * of the rescan's garbage collection).
 *
 * The rows of a folder are one range of the `files` primary key ([dir/, dir0): '0' follows
 * '/'); the rows of its subfolders are skipped with one seek each (`head0`), not read, and
 * their heads reported so the scan can read below a subfolder it does not enter.
 */
import type Database from 'better-sqlite3';
import type { IndexRow, Journal } from './journal.ts';

/** The same columns as Journal.indexUnderPaged. */
const COLUMNS = "path, kind = 'dir', size, mtime_ns, inode, hash IS NOT NULL, synced_rev IS NOT NULL";
export type RawIndexRow = [string, bigint, bigint, bigint, bigint, bigint, bigint];

/** Rows asked for at first, and after each subfolder skipped (most rows past it are its own). */
const FIRST_PAGE = 64;
/** Rows asked for at most at once (the page doubles while only the folder's own rows come). */
const MAX_PAGE = 4_096;

const statements = new WeakMap<Database.Database, Map<string, Database.Statement>>();

function sql(db: Database.Database, text: string): Database.Statement {
  let byText = statements.get(db);
  if (byText === undefined) {
    byText = new Map();
    statements.set(db, byText);
  }
  let st = byText.get(text);
  if (st === undefined) {
    st = db.prepare(text).raw(true);
    byText.set(text, st);
  }
  return st;
}

export function toIndexRow([path, isDir, size, mtimeNs, inode, hashed, synced]: RawIndexRow): IndexRow {
  return {
    path,
    kind: isDir === 1n ? 'dir' : 'file',
    size: Number(size),
    mtimeNs,
    inode,
    hashed: hashed === 1n,
    synced: synced === 1n,
  };
}

/**
 * Whether a file's stat matches its raw row (a file's, hashed): what `unchanged` (scan-rows.ts)
 * answers, without making the row's IndexRow — a no-change rescan makes none (issue #16).
 */
export function statMatches(
  [, isDir, size, mtimeNs, inode, hashed]: RawIndexRow,
  st: { readonly size: bigint; readonly mtimeNs: bigint; readonly ino: bigint },
): boolean {
  return isDir === 0n && hashed === 1n && size === st.size && mtimeNs === st.mtimeNs && inode === st.ino;
}

export interface FolderIndex {
  /** The raw rows directly in the folder by path, in path order (toIndexRow makes an IndexRow). */
  readonly rows: Map<string, RawIndexRow>;
  /** How many of `rows` are files. */
  readonly files: number;
  /** The paths directly in the folder that have rows below them (subfolders, as the index has them). */
  readonly below: string[];
}

/**
 * The rows directly in `dir` ('' = the root) and the heads of the rows below them. A turn of
 * the event loop between pages past MAX_PAGE rows (a folder of a million files).
 */
export async function indexIn(journal: Journal, dir: string): Promise<FolderIndex> {
  const prefix = dir === '' ? '' : `${dir}/`;
  const upper = dir === '' ? [] : [`${dir}0`];
  const range = dir === '' ? '' : 'AND path < ?';
  const after = sql(journal.db, `SELECT ${COLUMNS} FROM files WHERE path > ? ${range} ORDER BY path LIMIT ?`);
  const from = sql(journal.db, `SELECT ${COLUMNS} FROM files WHERE path >= ? ${range} ORDER BY path LIMIT ?`);
  const rows = new Map<string, RawIndexRow>();
  let files = 0;
  const below: string[] = [];
  let bound = prefix;
  let inclusive = false;
  let page = FIRST_PAGE;
  let sinceTurn = 0;
  for (;;) {
    const got = (inclusive ? from : after).all(bound, ...upper, page) as RawIndexRow[];
    let skipped = false;
    for (const r of got) {
      const slash = r[0].indexOf('/', prefix.length);
      if (slash < 0) {
        rows.set(r[0], r);
        if (r[1] === 0n) files += 1;
        bound = r[0];
        inclusive = false;
        continue;
      }
      // Below a subfolder: note it, and go on past its rows ('/' + 1 is '0').
      const head = r[0].slice(0, slash);
      below.push(head);
      bound = `${head}0`;
      inclusive = true;
      skipped = true;
      break;
    }
    if (!skipped && got.length < page) return { rows, files, below };
    page = skipped ? FIRST_PAGE : Math.min(page * 2, MAX_PAGE);
    sinceTurn += got.length;
    if (sinceTurn >= MAX_PAGE) {
      sinceTurn = 0;
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }
}

/** The row of `path` as a scan compares it, if the index has one. */
export function indexRowOf(journal: Journal, path: string): IndexRow | undefined {
  const r = sql(journal.db, `SELECT ${COLUMNS} FROM files WHERE path = ?`).get(path) as
    RawIndexRow | undefined;
  return r && toIndexRow(r);
}

/**
 * The paths of synced rows after `after` (exclusive; '' = from the start) up to `through`
 * (inclusive; undefined = to the end), in path order, a page at a time with a turn of the
 * event loop between pages: what a paged full listing compares one page's span with (issue
 * #16) — byte order, as the server's keyset pages are.
 */
export async function* syncedPathsBetween(
  journal: Journal,
  after: string,
  through: string | undefined,
  pageSize = 2_000,
): AsyncGenerator<string> {
  const upper = through === undefined ? '' : 'AND path <= ?';
  const page = sql(
    journal.db,
    `SELECT path FROM files WHERE path > ? ${upper} AND synced_rev IS NOT NULL ORDER BY path LIMIT ?`,
  );
  let last = after;
  for (;;) {
    const rows = page.all(last, ...(through === undefined ? [] : [through]), pageSize) as [string][];
    for (const [path] of rows) yield path;
    if (rows.length < pageSize) return;
    last = (rows[rows.length - 1] as [string])[0];
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}

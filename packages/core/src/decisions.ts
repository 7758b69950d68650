/**
 * The sync decision table: for one path, what the engine does given the local state, the
 * remote state and the last synced version. docs/sync-decisions.md is the same table in
 * prose; test/decisions.test.ts walks every row and checks that the page and this file
 * list the same rows. The engine asks `decide` and acts on the row's action; its traces
 * and activity name the row.
 *
 * States are relative to the last synced version (the base):
 *   'same'    present, content equal to the base
 *   'changed' present, content differs from the base
 *   'gone'    absent, though the base existed
 *   'new'     present, no base
 *   'absent'  absent, no base
 *
 * Rows D1–D15 are decided by the three contents alone. Rows D16 on are decided by a
 * circumstance the contents do not show (a hint): discovery states most of them (our own
 * write echoed, a refusal by the server …); a move (D20, D21) and a kind change (D22, D27)
 * are read from the observation itself. A hint outranks the contents. decide() takes one
 * Observation per path — {path, base, local, remote, kind, moveHint, hint} — and is pure.
 */
export type SideState = 'same' | 'changed' | 'gone' | 'new' | 'absent';

export type Action =
  | 'nothing'
  | 'upload'
  | 'download'
  | 'delete-remote'
  | 'delete-local'
  | 'record'
  | 'forget'
  | 'conflict'
  /** Rename the local entry as the remote one was renamed. */
  | 'move-local'
  /** A remote folder delete: trash what is unchanged, keep (and upload again) what is not. */
  | 'keep-changed'
  /** Leave this path alone (with a warning); the entry stays on the server. */
  | 'skip'
  /** Remove the local entry of the old kind (edits kept), then bring down the new one. */
  | 'replace-kind'
  /** The server kept our write as a conflicted copy: rename ours to match, fetch theirs. */
  | 'adopt-server-copy'
  /** Our move landed on a taken name: move ours on to a conflicted-copy name, fetch theirs. */
  | 'move-to-copy'
  /** The server lost what we moved: send it again as new content. */
  | 'reupload'
  /** Compare the whole folder with the server on the next pull. */
  | 'reconcile';

/** A circumstance that decides a path before its contents do (rows D16 on). */
export type Hint =
  /** The remote revision is the synced one: our own write echoed back, or already applied. */
  | 'echo'
  /** The remote content is one this device sent whose acknowledgement was lost (a crash). */
  | 'sent'
  /** The remote name differs only by case from an entry here, on a disk that folds case. */
  | 'case-clash'
  /** The remote folder went, holding files that are new or changed here. */
  | 'folder-gone-with-changes'
  /** The remote entry moved; we hold its source as synced and its destination is free. */
  | 'moved'
  /** The remote entry moved; we lack its source, or something is at its destination. */
  | 'moved-blocked'
  /** The remote entry is a file where the base was a folder, or the other way round. */
  | 'kind-changed'
  /** The server refused our write (someone changed the file first) and kept ours as a copy. */
  | 'refused-conflict'
  /** The server refused our move: the destination was taken meanwhile. */
  | 'refused-taken'
  /** The server refused our move: its source is gone there (deleted or moved elsewhere). */
  | 'refused-source-gone'
  /** The server refused an operation for any other reason. */
  | 'refused'
  /** A file created there under the name of a folder created here (never sent), or the other way round. */
  | 'kind-clash';

export interface DecisionRow {
  readonly id: string;
  /** Rows D1–D15: whether there is a base, and each side's state. Hint rows: undefined. */
  readonly base?: boolean;
  readonly local?: SideState;
  readonly remote?: SideState;
  /** Only rows where both sides hold content: are the two contents equal? */
  readonly equal?: boolean;
  readonly hint?: Hint;
  readonly action: Action;
  readonly why: string;
}

const content = (
  id: string,
  base: boolean,
  local: SideState,
  remote: SideState,
  action: Action,
  why: string,
  equal?: boolean,
): DecisionRow => ({ id, base, local, remote, action, why, ...(equal === undefined ? {} : { equal }) });

const hinted = (id: string, hint: Hint, action: Action, why: string): DecisionRow => ({
  id,
  hint,
  action,
  why,
});

export const DECISIONS: readonly DecisionRow[] = [
  content('D1', false, 'absent', 'absent', 'nothing', 'nothing anywhere'),
  content('D2', false, 'new', 'absent', 'upload', 'created here'),
  content('D3', false, 'absent', 'new', 'download', 'created there'),
  content('D4', false, 'new', 'new', 'record', 'same file created on both sides', true),
  content('D5', false, 'new', 'new', 'conflict', 'different files created on both sides', false),
  content('D6', true, 'same', 'same', 'nothing', 'in sync'),
  content('D7', true, 'changed', 'same', 'upload', 'edited here'),
  content('D8', true, 'same', 'changed', 'download', 'edited there'),
  content('D9', true, 'changed', 'changed', 'record', 'same edit on both sides', true),
  content('D10', true, 'changed', 'changed', 'conflict', 'both edited differently', false),
  content('D11', true, 'gone', 'same', 'delete-remote', 'deleted here'),
  content('D12', true, 'same', 'gone', 'delete-local', 'deleted there (local copy goes to the trash)'),
  content('D13', true, 'gone', 'gone', 'forget', 'deleted on both sides'),
  content(
    'D14',
    true,
    'gone',
    'changed',
    'download',
    'an edit there outranks a delete here: nothing is lost',
  ),
  content('D15', true, 'changed', 'gone', 'upload', 'an edit here outranks a delete there: nothing is lost'),
  hinted(
    'D16',
    'echo',
    'nothing',
    'the remote revision is the synced one: our own write, or already applied',
  ),
  hinted('D17', 'sent', 'record', 'our own write whose acknowledgement was lost: it is the new base'),
  hinted('D18', 'case-clash', 'skip', 'the name differs only by case from a file here: ours stays'),
  hinted(
    'D19',
    'folder-gone-with-changes',
    'keep-changed',
    'a folder deleted there holds edits or new files here: those stay and go up again',
  ),
  hinted('D20', 'moved', 'move-local', 'moved there: the same rename here, no transfer'),
  hinted('D21', 'moved-blocked', 'download', 'moved there, but the source is not here or the name is taken'),
  hinted('D22', 'kind-changed', 'replace-kind', 'a file became a folder there, or the other way round'),
  hinted('D23', 'refused-conflict', 'adopt-server-copy', 'the server kept our write as its conflicted copy'),
  hinted('D24', 'refused-taken', 'move-to-copy', 'our move met a name taken meanwhile: both kept'),
  hinted('D25', 'refused-source-gone', 'reupload', 'what we moved is gone there: it goes up as new'),
  hinted('D26', 'refused', 'reconcile', 'any other refusal: compare the whole folder'),
  hinted('D27', 'kind-clash', 'conflict', 'new on both sides with different kinds: ours moves on to a copy'),
];

export type EntryKind = 'file' | 'dir';

/** A remote move that brought the path (rows D20, D21). */
export interface MoveHint {
  /** Where the entry was. */
  readonly from: string;
  /** The journal holds the source as synced here. */
  readonly sourceHere: boolean;
  /** Nothing is at the destination here (neither in the journal nor on disk). */
  readonly destinationFree: boolean;
}

/** The circumstances discovery states outright; moves and kind changes are read from the observation. */
export type StatedHint = Exclude<Hint, 'moved' | 'moved-blocked' | 'kind-changed' | 'kind-clash'>;

/**
 * What discovery saw of one path: the scanner for a local change (sync/discovery/local.ts),
 * the feed, a listing or a repair for a remote one (sync/discovery/remote.ts), the server's
 * answer for one of ours (sync/refusals.ts). Contents are compared by hash; a folder has
 * no hash of its own, so discovery gives the same marker on each side where it is present.
 */
export interface Observation {
  /** The remote path. */
  readonly path: string;
  /** Content hash of the last synced version, if any. */
  readonly base: string | undefined;
  /** Content hash on disk now, or undefined if absent. */
  readonly local: string | undefined;
  /** Content hash on the remote now, or undefined if absent. */
  readonly remote: string | undefined;
  /**
   * The entry's kind on each side where discovery knows it: a base and a remote of
   * different kinds is D22; no base, and here and there different kinds, is D27.
   */
  readonly kind: { readonly base?: EntryKind; readonly local?: EntryKind; readonly remote?: EntryKind };
  /** The remote entry arrived by a move (D20, D21). */
  readonly moveHint?: MoveHint | undefined;
  /** A circumstance the rest does not show (D16–D19, D23–D26); it outranks everything. */
  readonly hint?: StatedHint | undefined;
}

function side(base: string | undefined, now: string | undefined): SideState {
  if (base === undefined) return now === undefined ? 'absent' : 'new';
  if (now === undefined) return 'gone';
  return now === base ? 'same' : 'changed';
}

/** The circumstance that decides an observation before its contents do, if any. */
function circumstance(o: Observation): Hint | undefined {
  if (o.hint !== undefined) return o.hint;
  if (o.moveHint !== undefined)
    return o.moveHint.sourceHere && o.moveHint.destinationFree ? 'moved' : 'moved-blocked';
  const { base, local, remote } = o.kind;
  if (base !== undefined && remote !== undefined && base !== remote) return 'kind-changed';
  if (base === undefined && local !== undefined && remote !== undefined && local !== remote)
    return 'kind-clash';
  return undefined;
}

/**
 * Find the row for an observation: a stated hint, then a move, then a kind change, then the
 * three contents (Syncthing's rule: a conflict needs both sides changed and different).
 */
export function decide(o: Observation): DecisionRow {
  const hint = circumstance(o);
  if (hint !== undefined) {
    const row = DECISIONS.find((r) => r.hint === hint);
    if (!row) throw new Error(`no decision for hint ${hint}`);
    return row;
  }
  const base = o.base !== undefined;
  const local = side(o.base, o.local);
  const remote = side(o.base, o.remote);
  const both = o.local !== undefined && o.remote !== undefined;
  const row = DECISIONS.find(
    (r) =>
      r.hint === undefined &&
      r.base === base &&
      r.local === local &&
      r.remote === remote &&
      (r.equal === undefined || (both && r.equal === (o.local === o.remote))),
  );
  if (!row) throw new Error(`no decision for base=${base} local=${local} remote=${remote}`);
  return row;
}

/** The observation of a path that only a stated circumstance decides (its contents unread). */
export function stated(path: string, hint: StatedHint): Observation {
  return { path, base: undefined, local: undefined, remote: undefined, kind: {}, hint };
}

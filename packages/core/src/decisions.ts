/**
 * The sync decision table: for one path, what the engine does given the local state, the
 * remote state and the last synced version. docs/sync-decisions.md is the same table in
 * prose; test/decisions.test.ts walks every row. Code names the branch it takes.
 *
 * States are relative to the last synced version (the base):
 *   'same'    present, content equal to the base
 *   'changed' present, content differs from the base
 *   'gone'    absent, though the base existed
 *   'new'     present, no base
 *   'absent'  absent, no base
 */
export type SideState = 'same' | 'changed' | 'gone' | 'new' | 'absent';

export type Action =
  'nothing' | 'upload' | 'download' | 'delete-remote' | 'delete-local' | 'record' | 'forget' | 'conflict';

export interface DecisionRow {
  readonly id: string;
  readonly base: boolean;
  readonly local: SideState;
  readonly remote: SideState;
  /** Only rows where both sides hold content: are the two contents equal? */
  readonly equal?: boolean;
  readonly action: Action;
  readonly why: string;
}

export const DECISIONS: readonly DecisionRow[] = [
  { id: 'D1', base: false, local: 'absent', remote: 'absent', action: 'nothing', why: 'nothing anywhere' },
  { id: 'D2', base: false, local: 'new', remote: 'absent', action: 'upload', why: 'created here' },
  { id: 'D3', base: false, local: 'absent', remote: 'new', action: 'download', why: 'created there' },
  {
    id: 'D4',
    base: false,
    local: 'new',
    remote: 'new',
    equal: true,
    action: 'record',
    why: 'same file created on both sides',
  },
  {
    id: 'D5',
    base: false,
    local: 'new',
    remote: 'new',
    equal: false,
    action: 'conflict',
    why: 'different files created on both sides',
  },
  { id: 'D6', base: true, local: 'same', remote: 'same', action: 'nothing', why: 'in sync' },
  { id: 'D7', base: true, local: 'changed', remote: 'same', action: 'upload', why: 'edited here' },
  { id: 'D8', base: true, local: 'same', remote: 'changed', action: 'download', why: 'edited there' },
  {
    id: 'D9',
    base: true,
    local: 'changed',
    remote: 'changed',
    equal: true,
    action: 'record',
    why: 'same edit on both sides',
  },
  {
    id: 'D10',
    base: true,
    local: 'changed',
    remote: 'changed',
    equal: false,
    action: 'conflict',
    why: 'both edited differently',
  },
  { id: 'D11', base: true, local: 'gone', remote: 'same', action: 'delete-remote', why: 'deleted here' },
  {
    id: 'D12',
    base: true,
    local: 'same',
    remote: 'gone',
    action: 'delete-local',
    why: 'deleted there (local copy goes to the trash)',
  },
  { id: 'D13', base: true, local: 'gone', remote: 'gone', action: 'forget', why: 'deleted on both sides' },
  {
    id: 'D14',
    base: true,
    local: 'gone',
    remote: 'changed',
    action: 'download',
    why: 'an edit there outranks a delete here: nothing is lost',
  },
  {
    id: 'D15',
    base: true,
    local: 'changed',
    remote: 'gone',
    action: 'upload',
    why: 'an edit here outranks a delete there: nothing is lost',
  },
];

export interface Observation {
  /** Content hash of the last synced version, if any. */
  readonly baseHash: string | undefined;
  /** Content hash on disk now, or undefined if absent. */
  readonly localHash: string | undefined;
  /** Content hash on the remote now, or undefined if absent. */
  readonly remoteHash: string | undefined;
}

function side(base: string | undefined, now: string | undefined): SideState {
  if (base === undefined) return now === undefined ? 'absent' : 'new';
  if (now === undefined) return 'gone';
  return now === base ? 'same' : 'changed';
}

/** Find the row for an observation (Syncthing's rule: a conflict needs both sides changed and different). */
export function decide(o: Observation): DecisionRow {
  const base = o.baseHash !== undefined;
  const local = side(o.baseHash, o.localHash);
  const remote = side(o.baseHash, o.remoteHash);
  const both = o.localHash !== undefined && o.remoteHash !== undefined;
  const row = DECISIONS.find(
    (r) =>
      r.base === base &&
      r.local === local &&
      r.remote === remote &&
      (r.equal === undefined || (both && r.equal === (o.localHash === o.remoteHash))),
  );
  if (!row) throw new Error(`no decision for base=${base} local=${local} remote=${remote}`);
  return row;
}

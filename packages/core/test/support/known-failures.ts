/**
 * Engine bugs the harness found that are not fixed yet (issue #15), and the random-schedule
 * seeds (1–200) that fail because of each. A seed listed here still runs; once its bug is
 * fixed the random test names it as passing and it comes off this list.
 */
/** Bugs found by the harness, not fixed yet (issue #15 report). */
export const BUGS = {
  folderMoveToCopy:
    'a folder renamed here onto a name another device took meanwhile: the pull merges theirs into our renamed folder (their files come down into it), then the refused rename (D24) moves the merged folder to the conflicted-copy name, their files with it: those stay on this device only under the copy',
} as const;

export const KNOWN: Record<number, keyof typeof BUGS> = {
  2: 'folderMoveToCopy',
};

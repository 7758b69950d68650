/**
 * The one conformance suite every provider runs (rclone's fstests, restic's backend
 * tests). A provider's test file only calls runProviderConformance. Each behaviour is
 * its own named test; a provider may declare a gap with a reason, shown in the test name.
 * The checks are in groups: writes.ts, reads.ts, mutations.ts, feed-and-faults.ts, over the
 * helpers in support.ts; they register in that order.
 */
import { afterEach, describe, it } from 'vitest';
import type { Provider } from '../provider.ts';
import { checkWrites } from './writes.ts';
import { checkReads } from './reads.ts';
import { checkMutations } from './mutations.ts';
import { checkFeedAndFaults } from './feed-and-faults.ts';

export { HOSTILE_PATHS } from './support.ts';

export type ConformanceTest =
  | 'putZeroLength'
  | 'putOneByte'
  | 'putFiveMiBPlusOne'
  | 'putTwentyMiBMultipart'
  | 'putStreamUnknownLength'
  | 'overwriteReplacesContent'
  | 'failedPutLeavesNothing'
  | 'abortedPutLeavesNothing'
  | 'wrongSizeLeavesNothing'
  | 'statNotFound'
  | 'readNotFound'
  | 'listPaginates'
  | 'listRecursive'
  | 'listMissingFolder'
  | 'rangeRead'
  | 'rangeReadRejectsBadRange'
  | 'unicodeNames'
  | 'specialCharacterNames'
  | 'hostilePathsRejected'
  | 'conditionalWriteRejectsStaleRev'
  | 'conditionalWriteAcceptsCurrentRev'
  | 'mustNotExistOnExisting'
  | 'mkdirIdempotent'
  | 'mkdirOverFile'
  | 'writeOverFolder'
  | 'removeMissing'
  | 'removeFolderRecursive'
  | 'conditionalRemove'
  | 'moveFile'
  | 'moveFolder'
  | 'copyFile'
  | 'copyFolder'
  | 'changeFeedOrderAndResume'
  | 'changeFeedFolderMove'
  | 'concurrentWriters'
  | 'retryRecoversFromTransient'
  | 'retryResumesBrokenRead'
  | 'sha256Verified';

export interface ConformanceOptions {
  readonly name: string;
  /** A provider over a fresh, empty namespace (a new folder, prefix or account subtree). */
  readonly create: () => Promise<Provider>;
  /** Declared gaps: test name → reason. */
  readonly skip?: Partial<Record<ConformanceTest, string>>;
  /** For backends with resumable/multipart uploads: how many unfinished uploads are left over. */
  readonly danglingUploads?: () => Promise<number>;
  /**
   * The backend's feed reports the latest state of each changed path rather than every
   * version (Dropbox list_folder/continue, Drive changes, Graph delta): the reason. The
   * feed test then asks for the last upsert to carry the newest revision instead of one
   * upsert per write; order, resume, deletes and reset are checked the same way.
   */
  readonly coalescedChangeFeed?: string;
  /** Per-test timeout in ms (remote backends need more). Default 60 s. */
  readonly timeoutMs?: number;
}

export function runProviderConformance(options: ConformanceOptions): void {
  const open: Provider[] = [];
  const fresh = async (): Promise<Provider> => {
    const p = await options.create();
    open.push(p);
    return p;
  };
  const timeout = options.timeoutMs ?? 60_000;
  const test = (name: ConformanceTest, fn: () => Promise<void>): void => {
    const reason = options.skip?.[name];
    if (reason !== undefined) it.skip(`${name} — declared gap: ${reason}`, fn);
    else it(name, fn, timeout);
  };

  const ctx = { options, fresh, test };
  describe(`provider conformance: ${options.name}`, () => {
    afterEach(async () => {
      for (const p of open.splice(0)) await p.close?.();
    });

    checkWrites(ctx);
    checkReads(ctx);
    checkMutations(ctx);
    checkFeedAndFaults(ctx);
  });
}
export { runPlacementStoreSuite } from './placement-store.ts';

/**
 * Small pieces of the filesystem tier: revisions from stat, the case-sensitivity probe,
 * bounded concurrency, directory fsync, Node's error codes in the contract's terms, and the
 * tier's features.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import {
  AlreadyExistsError,
  AuthError,
  InvalidPathError,
  NotFoundError,
  ProviderError,
  QuotaExceededError,
  TransientError,
} from '../../errors.ts';
import type { Features } from '../../features.ts';

export function revisionOf(st: import('node:fs').BigIntStats): string {
  return `${st.ino.toString(36)}.${st.ctimeNs.toString(36)}.${st.mtimeNs.toString(36)}.${st.size.toString(36)}`;
}

export async function probeCaseSensitive(stateDir: string): Promise<boolean> {
  const probe = nodePath.join(stateDir, 'CaseProbe');
  await fsp.writeFile(probe, '');
  try {
    await fsp.access(nodePath.join(stateDir, 'caseprobe'));
    return false;
  } catch {
    return true;
  } finally {
    await fsp.rm(probe, { force: true });
  }
}

/** Run `work(0..n-1)` with at most `limit` calls in flight. */
export async function forEachBounded(
  n: number,
  limit: number,
  work: (i: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < n) await work(next++);
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, n)) }, lane));
}

export async function fsyncDir(dir: string): Promise<void> {
  const fh = await fsp.open(dir, 'r');
  try {
    await fh.sync();
  } catch {
    // Some filesystems refuse fsync on a directory; the rename is still atomic there.
  } finally {
    await fh.close();
  }
}

export function isAbort(e: unknown): boolean {
  return e instanceof Error && e.name === 'AbortError';
}

/** Map a Node filesystem error to the contract's error set. */
export function classify(e: unknown, name: string, p: string): Error {
  if (e instanceof ProviderError || isAbort(e)) return e as Error;
  const err = e as NodeJS.ErrnoException;
  const msg = `${name}: ${p}: ${err.message}`;
  switch (err.code) {
    case 'ENOENT':
      return new NotFoundError(msg, { cause: e });
    case 'EEXIST':
    case 'ENOTEMPTY':
    case 'ENOTDIR':
    case 'EISDIR':
      return new AlreadyExistsError(msg, { cause: e });
    case 'ENOSPC':
    case 'EDQUOT':
    case 'EFBIG':
      return new QuotaExceededError(msg, { cause: e });
    case 'EACCES':
    case 'EPERM':
    case 'EROFS':
      return new AuthError(msg, { cause: e });
    case 'ENAMETOOLONG':
    case 'EILSEQ':
    case 'ELOOP':
      return new InvalidPathError(msg, p, { cause: e });
    case 'EAGAIN':
    case 'EBUSY':
    case 'EMFILE':
    case 'ENFILE':
    case 'EIO':
    case 'ETIMEDOUT':
    case 'ESTALE':
      return new TransientError(msg, undefined, { cause: e });
    default:
      return new TransientError(msg, undefined, { cause: e });
  }
}

/** What the filesystem tier offers (`caseSensitive` probed at open; `changeFeed` unless turned off). */
export function fsFeatures(caseSensitive: boolean, changeFeed: boolean): Features {
  return {
    move: 'files-and-folders',
    copy: 'files-and-folders',
    changeFeed,
    conditionalWrite: true,
    rangeRead: true,
    caseSensitive,
    setModTime: true,
    maxSingleUploadBytes: Number.MAX_SAFE_INTEGER,
    hashAlgorithm: 'sha256',
    hashInListing: false,
    folders: 'real',
    notes: {
      conditionalWrite:
        'must-not-exist writes are atomic across processes (link(2)); revision checks are atomic within one process, which owns the directory',
      changeFeed: 'journal of changes made through this provider; edits by other programs need a listing',
      hashInListing: 'SHA-256 needs the content; stat computes it (cached by revision)',
    },
  };
}

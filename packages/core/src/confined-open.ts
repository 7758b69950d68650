/**
 * Open a file of the synced folder for reading, on the event loop, confined as
 * LocalPaths.resolve confines it, for one syscall instead of a realpath (the upload of every
 * small file, issue #16: a realpath a file was ~3 % of the agent's CPU on a 10,000-file drop).
 *
 * On Linux the file is opened with O_NOFOLLOW and where it really is is read back from
 * /proc/self/fd: the kernel's record of the very file opened, so there is no gap between a
 * check and the open (a folder swapped for a link before the open shows in the answer; one
 * swapped after it does not change which file was opened). Accepted only when that is
 * exactly where the names say under the folder's real path — then no component was a link
 * when it was opened. Anything else (another platform, no /proc, an error, a link, a path
 * that differs, say by case) returns undefined having kept nothing open: the caller takes
 * resolve() and an open of its own, as before.
 */
import * as fs from 'node:fs';
import * as nodePath from 'node:path';
import type { LocalPaths } from './local-path.ts';

interface State {
  /** The folder's real path (undefined: not known, the slow way). */
  realRoot: string | undefined;
  /** Files opened and accepted here (tests count them). */
  opened: number;
}

const states = new WeakMap<LocalPaths, State>();
/** Whether /proc/self/fd answers (false once it did not). */
let procFd = process.platform === 'linux';

function stateOf(paths: LocalPaths): State {
  let s = states.get(paths);
  if (s === undefined) {
    let realRoot: string | undefined;
    try {
      realRoot = fs.realpathSync.native(paths.root);
    } catch {
      realRoot = undefined;
    }
    s = { realRoot, opened: 0 };
    states.set(paths, s);
  }
  return s;
}

/** A descriptor open for reading on the file at `remotePath` (the caller closes it), or undefined. */
export function openReadConfinedSync(paths: LocalPaths, remotePath: string): number | undefined {
  if (!procFd) return undefined;
  const state = stateOf(paths);
  if (state.realRoot === undefined) return undefined;
  const mapped = paths.map(remotePath);
  if (mapped.names.length === 0) return undefined;
  let fd: number;
  try {
    // O_NONBLOCK: a FIFO swapped in answers at once instead of holding the loop.
    fd = fs.openSync(mapped.abs, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  let real: string | undefined;
  try {
    real = fs.readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    procFd = false; // no /proc: the realpath way from now on
  }
  // The names joined by hand, not by path.join (its normalising was ~1 % of the upload path,
  // issue #16): the kernel's answer is canonical, so when it equals this string no name was
  // '.', '..' or empty, and path.join would give the same string; anything else goes the slow way.
  if (real !== undefined && real === state.realRoot + nodePath.sep + mapped.names.join(nodePath.sep)) {
    state.opened += 1;
    return fd;
  }
  fs.closeSync(fd);
  return undefined;
}

/** How many files openReadConfinedSync opened and accepted for `paths` (tests). */
export function openedConfined(paths: LocalPaths): number {
  return states.get(paths)?.opened ?? 0;
}

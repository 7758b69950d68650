/**
 * The one place a remote (provider) path becomes a path on this computer's disk, and a name
 * read from the disk becomes a remote name again (issue #14: names that are unsafe on
 * another platform must never escape or be lost).
 *
 * Every filesystem touch of the engine goes through `LocalPaths.resolve`: a remote path is
 * mapped segment by segment to a local name under the platform's rules (`posix`, `darwin`,
 * `win32`, selectable so Windows rules can be tested on Linux), the joined path is checked,
 * with that platform's `node:path` flavour, to lie strictly inside the folder, and no
 * existing component below the folder may be a symbolic link (a link inside the folder that
 * points out is never followed). Anything else is refused with `UnsafeLocalPathError`.
 *
 * The name encoding itself (look-alikes, quoting, long forms) lives in local-name.ts and is
 * re-exported here.
 */
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { LoopGate } from './loop-gate.ts';
import {
  type EncodeReason,
  type PathRules,
  UnsafeLocalPathError,
  decodeName,
  encodeName,
  hostPathRules,
  pathFlavour,
} from './local-name.ts';

export {
  DEVICE_MARK,
  type EncodeReason,
  type LocalName,
  MAX_LOCAL_NAME,
  type PathRules,
  QUOTE,
  UnsafeLocalPathError,
  decodeName,
  decodeSlowly,
  describeEncoding,
  encodeName,
  encodeSlowly,
  hostPathRules,
  isPlainName,
  pathFlavour,
} from './local-name.ts';

function absolute(p: nodePath.PlatformPath, root: string): string {
  // win32's resolve consults the environment (per-drive cwd): only for relative roots.
  const abs = p.isAbsolute(root) ? p.normalize(root) : p.resolve(root);
  return abs.length > 1 && abs.endsWith(p.sep) && !/^[A-Za-z]:\\$/.test(abs) ? abs.slice(0, -1) : abs;
}

/**
 * The last absolute root normalised (per flavour), as absolute() gave it: every file an upload
 * reads is mapped under the same folder, and its root was normalised again each time (~2 % of
 * the agent's CPU in a first sync's upload path, issue #16). Absolute roots only (a relative
 * one depends on the working directory).
 */
let lastBase: { p: nodePath.PlatformPath; root: string; base: string } | undefined;

function absoluteBase(p: nodePath.PlatformPath, root: string): string {
  if (lastBase !== undefined && lastBase.p === p && lastBase.root === root) return lastBase.base;
  const base = absolute(p, root);
  if (p.isAbsolute(root)) lastBase = { p, root, base };
  return base;
}

/** A remote path mapped to this disk. */
export interface MappedPath {
  /** Absolute path inside the folder. */
  readonly abs: string;
  /** The local names, one per remote segment. */
  readonly names: readonly string[];
  /** Segments stored under another name (index into names). */
  readonly encoded: readonly { readonly index: number; readonly reason: EncodeReason }[];
}

/**
 * Map `remotePath` (`/`-separated) under `root` with these rules, checking lexically that
 * the result lies strictly inside `root` (the root itself only for `''` when allowed).
 * Pure: touches no disk. Throws UnsafeLocalPathError.
 */
export function mapRemotePath(
  root: string,
  remotePath: string,
  rules: PathRules,
  options: { allowRoot?: boolean; flavour?: nodePath.PlatformPath } = {},
): MappedPath {
  const p = options.flavour ?? pathFlavour(rules);
  if (remotePath === '') {
    if (options.allowRoot) return { abs: absolute(p, root), names: [], encoded: [] };
    throw new UnsafeLocalPathError('the folder itself is not an entry', remotePath);
  }
  const names: string[] = [];
  const encoded: { index: number; reason: EncodeReason }[] = [];
  for (const segment of remotePath.split('/')) {
    const e = encodeName(segment, rules);
    if (e.reason !== undefined) encoded.push({ index: names.length, reason: e.reason });
    names.push(e.name);
  }
  const base = absoluteBase(p, root);
  const prefix = base.endsWith(p.sep) ? base : base + p.sep;
  const abs = prefix + names.join(p.sep);
  // Defence in depth: whatever the names hold, the joined path must stay strictly inside,
  // and a later normalisation of it (by the OS or by node:path) must not move it.
  const inside =
    !names.some((n) => n === '.' || n === '..' || n.includes('/') || n.includes(p.sep) || n.includes('\0')) &&
    p.normalize(abs) === abs &&
    abs.startsWith(prefix) &&
    abs.length > prefix.length;
  if (!inside)
    throw new UnsafeLocalPathError(
      `${JSON.stringify(remotePath)} would not stay inside the folder`,
      remotePath,
    );
  return { abs, names, encoded };
}

/**
 * The engine's view of its folder: every remote path it touches is resolved here.
 * `longNames` maps a long-form local name back (the journal's record).
 */
export class LocalPaths {
  readonly root: string;

  constructor(
    root: string,
    readonly rules: PathRules = hostPathRules(),
    private readonly longNames?: (localName: string) => string | undefined,
  ) {
    this.root = nodePath.resolve(root);
  }

  /** Lexical mapping only (no disk access): see mapRemotePath. */
  map(remotePath: string, allowRoot = false): MappedPath {
    // The folder is on this disk: join with this host's flavour, name by the chosen rules;
    // both flavours must agree that the path stays inside.
    const mapped = mapRemotePath(this.root, remotePath, this.rules, { allowRoot, flavour: nodePath });
    if (this.rules === 'win32' && nodePath.sep !== '\\')
      mapRemotePath('C:\\Weft', remotePath, this.rules, { allowRoot });
    return mapped;
  }

  /** The local path, relative to the folder, `/`-separated (for the trash, notices). */
  localRel(remotePath: string): string {
    return this.map(remotePath).names.join('/');
  }

  /**
   * Resolve for a filesystem touch: the mapped path, after checking that no existing
   * component below the folder — the entry itself included — is a symbolic link or (for
   * the ancestors) anything but a folder. Throws UnsafeLocalPathError.
   */
  async resolve(remotePath: string, allowRoot = false): Promise<string> {
    const mapped = this.map(remotePath, allowRoot);
    if (await this.plainlyInside(mapped.names)) return mapped.abs;
    let dir = this.root;
    for (let i = 0; i < mapped.names.length; i++) {
      dir = nodePath.join(dir, mapped.names[i] as string);
      let st: import('node:fs').Stats;
      try {
        st = await fsp.lstat(dir);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === 'ENOENT' || code === 'ENOTDIR') break; // nothing further exists: created as real folders
        throw e;
      }
      if (st.isSymbolicLink())
        throw new UnsafeLocalPathError(
          `${JSON.stringify(remotePath)} passes through a symbolic link; it is not followed`,
          remotePath,
        );
      if (i < mapped.names.length - 1 && !st.isDirectory()) break; // a file where a folder goes: the caller sees ENOTDIR
    }
    return mapped.abs;
  }

  private realRoot: string | undefined;

  /**
   * On the event loop or through the thread pool (loop-gate.ts): the engine resolves every
   * file it uploads twice, a realpath each time — through the pool that was ~4x the CPU of
   * the call itself (20 vs 5 µs a file measured; 13 s of a 100,000-file first sync, issue
   * #16). Shared with the scanner's stats of this folder.
   */
  readonly gate = new LoopGate();

  /** realpath(3) of `p`, on the loop or in the pool as the gate says. */
  private realpath(p: string): Promise<string> {
    return this.gate.run(
      () => fs.realpathSync.native(p),
      () => fsp.realpath(p),
    );
  }

  /**
   * Fast path (one realpath): the deepest existing component resolves to exactly where the
   * names say, so no component is a link. Anything else (a link, or a disk that reports
   * another case or normalisation) is decided by the component-by-component walk. Nothing
   * is remembered between calls: a folder swapped for a link since the last call is seen
   * (a cache of checked folders would need an lstat per component to stay true, which costs
   * more than this one realpath on the event loop).
   */
  private async plainlyInside(names: readonly string[]): Promise<boolean> {
    if (names.length === 0) return true;
    this.realRoot ??= await this.realpath(this.root).catch(() => this.root);
    for (let n = names.length; n >= 1; n--) {
      const parts = names.slice(0, n);
      const lexical = nodePath.join(this.root, ...parts);
      let real: string;
      try {
        real = await this.realpath(lexical);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code !== 'ENOENT' && code !== 'ENOTDIR') return false;
        // Absent — or a dangling link, which the walk refuses.
        if (
          await fsp.lstat(lexical).then(
            () => true,
            () => false,
          )
        )
          return false;
        continue;
      }
      return real === nodePath.join(this.realRoot, ...parts);
    }
    return true;
  }

  /** Map a local name (one segment read from the disk) back to its remote name, or undefined. */
  remoteName(localName: string): string | undefined {
    return decodeName(localName, this.rules, this.longNames);
  }

  /** Map a `/`-separated local relative path back, or undefined if a segment is not Weft's. */
  remotePath(localRel: string): string | undefined {
    if (localRel === '') return '';
    const out: string[] = [];
    for (const s of localRel.split('/')) {
      const r = this.remoteName(s);
      if (r === undefined) return undefined;
      out.push(r);
    }
    return out.join('/');
  }
}

/**
 * Which paths are not synced: `.weftignore` files (gitignore syntax, one per folder, rules
 * relative to that folder) on top of defaults everyone expects. The engine's own working
 * files are always ignored.
 */
import ignore, { type Ignore } from 'ignore';

export const DEFAULT_IGNORES: readonly string[] = [
  '.DS_Store',
  'Thumbs.db',
  'desktop.ini',
  '~$*',
  '*.tmp',
  '.~lock.*',
  '*.swp',
  '.weft',
  '.weft-partial-*',
];

export const IGNORE_FILE = '.weftignore';

/** What a pattern may hold for the basename prefilter (else there is no prefilter). */
const SIMPLE_PATTERN = /^[A-Za-z0-9._~$*?+=,@%/-]+$/;

/**
 * A test a name (a path's last segment) must pass for any of `patterns` to match the path
 * itself, or undefined when some pattern is beyond this simple reading (then every path is
 * asked of the matcher). Wider than the patterns, never narrower: a pattern matches a whole
 * segment, the last of its own segments is what can match the path's name (its other
 * segments, and dir-only or root-anchored forms, only narrow it; a match of a folder above
 * is the ancestors' check), `*` and `?` become any run and any character, and a negation
 * only ever un-ignores. Case-insensitive, as the `ignore` package's default.
 */
export function namePrefilter(patterns: readonly string[]): RegExp | undefined {
  const alternatives: string[] = [];
  for (const line of patterns.flatMap((p) => p.split(/\r?\n/))) {
    if (line === '' || line.startsWith('#') || /^\s+$/.test(line)) continue; // no rule
    if (line.startsWith('!')) continue; // un-ignores only
    if (!SIMPLE_PATTERN.test(line)) return undefined;
    const last = line.replace(/\/+$/, '').split('/').pop() ?? '';
    if (last === '' || last.includes('**')) return undefined;
    alternatives.push(last.replace(/[.$+*?]/g, (c) => (c === '*' ? '.*' : c === '?' ? '.' : `\\${c}`)));
  }
  return new RegExp(`^(?:${alternatives.join('|')})$`, 'i');
}

/** Paths the matchers may remember before they are made again (IgnoreRules.asked). */
const MAX_REMEMBERED = 20_000;
/** Folders whose verdict IgnoreRules keeps (then it starts again). */
const MAX_ANCESTOR_VERDICTS = 10_000;

export class IgnoreRules {
  private root: Ignore;
  /** What a name must pass for the root rules to match the path itself (namePrefilter). */
  private rootNames: RegExp | undefined;
  private extra: readonly string[];
  private readonly perFolder = new Map<string, Ignore>();
  /** The text of each folder's rules (to make its matcher again: see `asked`). */
  private readonly perFolderText = new Map<string, string>();
  /**
   * Paths asked about since the matchers were made. The `ignore` package remembers its
   * answer for every path it was asked (14 MiB after a scan of 100,000 files, kept for the
   * agent's life: issue #16); past MAX_REMEMBERED the matchers are made again, empty.
   */
  private asked = 0;
  /**
   * What the root rules say of the folders above a path, by the path's kind and its parent
   * folder: a scan asks of every file, and 100,000 files share a few hundred folders —
   * asking the rules again each time was a third of a no-change rescan (issue #16). Emptied
   * when the root rules change; bounded.
   */
  private readonly ancestorVerdicts = [new Map<string, boolean>(), new Map<string, boolean>()] as const;
  /** Folders left out by selective sync (selection.ts): not synced either way, as if ignored. */
  private excluded: (path: string) => boolean = () => false;

  constructor(extraPatterns: readonly string[] = []) {
    this.extra = [...extraPatterns];
    this.root = ignore().add([...DEFAULT_IGNORES, ...extraPatterns]);
    this.rootNames = namePrefilter([...DEFAULT_IGNORES, ...extraPatterns]);
  }

  /** Replace the patterns from Settings (the defaults and `.weftignore` files stay). */
  setExtraPatterns(patterns: readonly string[]): void {
    this.extra = [...patterns];
    this.root = ignore().add([...DEFAULT_IGNORES, ...patterns]);
    this.rootNames = namePrefilter([...DEFAULT_IGNORES, ...patterns]);
    for (const v of this.ancestorVerdicts) v.clear();
  }

  /** Treat the paths `excluded` answers true for as ignored (selective sync, selective-sync.ts). */
  setExcluded(excluded: (path: string) => boolean): void {
    this.excluded = excluded;
  }

  /** The patterns from Settings in force. */
  extraPatterns(): readonly string[] {
    return this.extra;
  }

  /** Set the rules of the `.weftignore` in `folder` ('' for the root); empty text removes them. */
  setFolderRules(folder: string, text: string): void {
    if (text.trim() === '') {
      this.perFolder.delete(folder);
      this.perFolderText.delete(folder);
    } else {
      this.perFolder.set(folder, ignore().add(text));
      this.perFolderText.set(folder, text);
    }
  }

  /** A matcher's answer for `rel`, a folder's with its slash (no closure made per path asked). */
  private static matches(ig: Ignore, rel: string, isDir: boolean): boolean {
    return ig.ignores(isDir ? rel + '/' : rel);
  }

  /** Is `path` (a provider path) ignored? `isDir` lets folder-only patterns (`build/`) match. */
  ignores(path: string, isDir = false): boolean {
    if (this.excluded(path)) return true;
    if (++this.asked > MAX_REMEMBERED) {
      this.asked = 0;
      this.root = ignore().add([...DEFAULT_IGNORES, ...this.extra]);
      for (const [folder, text] of this.perFolderText) this.perFolder.set(folder, ignore().add(text));
    }
    // Every ancestor's .weftignore applies to what is below it; an ignored folder hides its content.
    const slash = path.lastIndexOf('/');
    if (slash > 0) {
      const parent = path.slice(0, slash);
      const verdicts = this.ancestorVerdicts[isDir ? 1 : 0];
      let verdict = verdicts.get(parent);
      if (verdict === undefined) {
        verdict = false;
        for (let i = path.indexOf('/'); i >= 0 && !verdict; i = path.indexOf('/', i + 1)) {
          const ancestor = path.slice(0, i);
          // As the matcher asks of a path's folders (`a/`), and as this always asked.
          verdict =
            this.root.ignores(ancestor + '/') ||
            IgnoreRules.matches(this.root, ancestor + '/', isDir) ||
            this.root.ignores(ancestor);
        }
        if (verdicts.size >= MAX_ANCESTOR_VERDICTS) verdicts.clear();
        verdicts.set(parent, verdict);
      }
      if (verdict) return true;
    }
    // The path itself: only when its name could match a root rule at all (namePrefilter).
    const name = slash < 0 ? path : path.slice(slash + 1);
    if (
      (this.rootNames === undefined || this.rootNames.test(name)) &&
      IgnoreRules.matches(this.root, path, isDir)
    )
      return true;
    if (this.perFolder.size === 0) return false; // no .weftignore: no iterator a path
    for (const [folder, ig] of this.perFolder) {
      if (folder !== '' && !path.startsWith(folder + '/')) continue;
      const rel = folder === '' ? path : path.slice(folder.length + 1);
      if (IgnoreRules.matches(ig, rel, isDir)) return true;
      const relSegs = rel.split('/');
      for (let i = 1; i < relSegs.length; i++)
        if (ig.ignores(relSegs.slice(0, i).join('/') + '/')) return true;
    }
    return false;
  }
}

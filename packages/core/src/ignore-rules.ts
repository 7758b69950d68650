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

/** Paths the matchers may remember before they are made again (IgnoreRules.asked). */
const MAX_REMEMBERED = 20_000;
/** Folders whose verdict IgnoreRules keeps (then it starts again). */
const MAX_ANCESTOR_VERDICTS = 10_000;

export class IgnoreRules {
  private root: Ignore;
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
   * What the root rules say of each folder above a path (by the path's kind and the folder):
   * a scan asks of every file, and 100,000 files share a few hundred folders — asking the
   * rules again each time was a third of a no-change rescan (issue #16). Emptied when the
   * root rules change; bounded.
   */
  private readonly ancestorVerdicts = new Map<string, boolean>();
  /** Folders left out by selective sync (selection.ts): not synced either way, as if ignored. */
  private excluded: (path: string) => boolean = () => false;

  constructor(extraPatterns: readonly string[] = []) {
    this.extra = [...extraPatterns];
    this.root = ignore().add([...DEFAULT_IGNORES, ...extraPatterns]);
  }

  /** Replace the patterns from Settings (the defaults and `.weftignore` files stay). */
  setExtraPatterns(patterns: readonly string[]): void {
    this.extra = [...patterns];
    this.root = ignore().add([...DEFAULT_IGNORES, ...patterns]);
    this.ancestorVerdicts.clear();
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

  /** Is `path` (a provider path) ignored? `isDir` lets folder-only patterns (`build/`) match. */
  ignores(path: string, isDir = false): boolean {
    if (this.excluded(path)) return true;
    if (++this.asked > MAX_REMEMBERED) {
      this.asked = 0;
      this.root = ignore().add([...DEFAULT_IGNORES, ...this.extra]);
      for (const [folder, text] of this.perFolderText) this.perFolder.set(folder, ignore().add(text));
    }
    const test = (ig: Ignore, rel: string): boolean => ig.ignores(isDir ? rel + '/' : rel);
    if (test(this.root, path)) return true;
    // Every ancestor's .weftignore applies to what is below it; an ignored folder hides its content.
    for (let i = path.indexOf('/'); i >= 0; i = path.indexOf('/', i + 1)) {
      const ancestor = path.slice(0, i);
      const key = (isDir ? 'd' : 'f') + ancestor;
      let verdict = this.ancestorVerdicts.get(key);
      if (verdict === undefined) {
        verdict = test(this.root, ancestor + '/') || this.root.ignores(ancestor);
        if (this.ancestorVerdicts.size >= MAX_ANCESTOR_VERDICTS) this.ancestorVerdicts.clear();
        this.ancestorVerdicts.set(key, verdict);
      }
      if (verdict) return true;
    }
    for (const [folder, ig] of this.perFolder) {
      if (folder !== '' && !path.startsWith(folder + '/')) continue;
      const rel = folder === '' ? path : path.slice(folder.length + 1);
      if (test(ig, rel)) return true;
      const relSegs = rel.split('/');
      for (let i = 1; i < relSegs.length; i++)
        if (ig.ignores(relSegs.slice(0, i).join('/') + '/')) return true;
    }
    return false;
  }
}

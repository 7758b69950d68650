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

export class IgnoreRules {
  private root: Ignore;
  private extra: readonly string[];
  private readonly perFolder = new Map<string, Ignore>();
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
    if (text.trim() === '') this.perFolder.delete(folder);
    else this.perFolder.set(folder, ignore().add(text));
  }

  /** Is `path` (a provider path) ignored? `isDir` lets folder-only patterns (`build/`) match. */
  ignores(path: string, isDir = false): boolean {
    if (this.excluded(path)) return true;
    const test = (ig: Ignore, rel: string): boolean => ig.ignores(isDir ? rel + '/' : rel);
    if (test(this.root, path)) return true;
    // Every ancestor's .weftignore applies to what is below it; an ignored folder hides its content.
    const segments = path.split('/');
    for (let i = 1; i < segments.length; i++) {
      const ancestor = segments.slice(0, i).join('/');
      if (test(this.root, ancestor + '/') || this.root.ignores(ancestor)) return true;
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

/**
 * History: a file's versions as Weft storage keeps them (time, device, size) with "Restore"
 * and "Download this version", and the files deleted in a folder with "Restore"
 * (docs/desktop.md "Version history and deleted files"). Opened from a row of the activity
 * list (`#history?path=…`), from its "Deleted files" link (`#history?folder=…`) or from the
 * form at the top. Restoring is a write on the server: every device gets the file back.
 * A folder added in Settings is named by `&in=<its name>` (absent: the main folder); its
 * paths are as they are in that folder.
 */
import type { DeletedFiles, FileHistory, FileVersionView, WeftClient } from '../../common/api.ts';
import { formatBytes } from '../../common/format.ts';
import { Scope, h, renderInto, timeText } from '../dom.mts';

/** Which synced folder: an added folder's name; absent for the main folder. */
type In = { syncedFolder?: string };

/** What the hash asks for: one file's versions, or a folder's deleted files. */
export function historyTarget(hash: string): ({ path: string } | { folder: string }) & In {
  const q = new URLSearchParams(hash.includes('?') ? hash.slice(hash.indexOf('?') + 1) : '');
  const path = q.get('path');
  const synced = q.get('in');
  const within = synced ? { syncedFolder: synced } : {};
  if (path) return { path, ...within };
  return { folder: q.get('folder') ?? '', ...within };
}

export function historyHash(target: ({ path: string } | { folder: string }) & In): string {
  const within = target.syncedFolder ? `&in=${encodeURIComponent(target.syncedFolder)}` : '';
  return 'path' in target
    ? `#history?path=${encodeURIComponent(target.path)}${within}`
    : `#history?folder=${encodeURIComponent(target.folder)}${within}`;
}

/**
 * The link an activity row carries to the file's history ("Restore" for a deletion);
 * `syncedFolder`: the added folder the row is of (absent: the main folder).
 */
export function historyLink(path: string, kind: string, syncedFolder?: string): HTMLElement | null {
  if (kind === 'error' || path === '') return null;
  const deleted = kind === 'deleted';
  const where = syncedFolder ? `${syncedFolder}: ` : '';
  return h(
    'a',
    {
      href: historyHash({ path, ...(syncedFolder ? { syncedFolder } : {}) }),
      class: 'history-link',
      'aria-label': `${deleted ? 'Restore' : 'Versions of'} ${where}${path}`,
    },
    deleted ? 'Restore' : 'Versions',
  );
}

function parentOf(path: string): string {
  const i = path.lastIndexOf('/');
  return i < 0 ? '' : path.slice(0, i);
}

function versionState(v: FileVersionView): string {
  if (v.current) return 'Current version';
  if (v.deleted) return `Deleted ${v.replacedMs !== undefined ? timeText(v.replacedMs) : ''}`.trim();
  return `Replaced ${v.replacedMs !== undefined ? timeText(v.replacedMs) : ''}`.trim();
}

export function historyScreen(
  root: HTMLElement,
  api: WeftClient,
  scope: Scope,
  report: (m: string) => void,
): void {
  const target = historyTarget(location.hash);
  const within: In = target.syncedFolder ? { syncedFolder: target.syncedFolder } : {};
  const result = h('p', { id: 'history-result', role: 'status', 'aria-live': 'polite' });
  const body = h('div', { id: 'history' }, h('p', {}, 'Loading…'));
  const input = h('input', {
    id: 'history-path',
    type: 'text',
    autocomplete: 'off',
    spellcheck: 'false',
    value: 'path' in target ? target.path : target.folder,
  });
  const go = (kind: 'path' | 'folder'): void => {
    const v = input.value.trim().replace(/^\/+|\/+$/g, '');
    location.hash = historyHash(kind === 'path' ? { path: v, ...within } : { folder: v, ...within });
  };
  const form = h(
    'form',
    {
      class: 'history-form',
      onsubmit: (e: Event) => {
        e.preventDefault();
        go(input.value.trim() === '' ? 'folder' : 'path');
      },
    },
    h(
      'label',
      { for: 'history-path' },
      target.syncedFolder ? `File or folder in ${target.syncedFolder}` : 'File or folder in your Weft folder',
    ),
    h(
      'p',
      { class: 'hint', id: 'history-path-hint' },
      'For example Documents/report.pdf; empty for the whole folder.',
    ),
    input,
    ' ',
    h('button', { type: 'submit', id: 'history-show-versions' }, 'Show versions'),
    ' ',
    h(
      'button',
      { type: 'button', id: 'history-show-deleted', onclick: () => go('folder') },
      'Show deleted files',
    ),
  );
  input.setAttribute('aria-describedby', 'history-path-hint');
  root.replaceChildren(h('h2', {}, 'History'), form, result, body);

  let alive = true;
  scope.add(() => (alive = false));
  const failed = (e: unknown): void => report(e instanceof Error ? e.message : String(e));
  const busy = (button: HTMLButtonElement, run: () => Promise<string>): void => {
    button.disabled = true;
    result.textContent = '';
    run().then(
      (message) => {
        if (!alive) return;
        result.textContent = message;
        load();
      },
      (e: unknown) => {
        if (!alive) return;
        button.disabled = false;
        failed(e);
      },
    );
  };

  const showVersions = (path: string, r: FileHistory): Node[] => {
    if (!r.available)
      return [
        h('p', { id: 'history-unavailable' }, r.reason),
        // A deleted folder has no versions of its own: its files are among the deleted ones.
        h(
          'p',
          {},
          h(
            'a',
            { href: historyHash({ folder: path, ...within }), id: 'history-deleted-below' },
            `Deleted files in ${path}`,
          ),
          ' · ',
          h(
            'a',
            { href: historyHash({ folder: parentOf(path), ...within }) },
            'Deleted files in the folder around it',
          ),
        ),
      ];
    const rows = r.versions.map((v) => {
      const when = v.savedMs !== undefined ? timeText(v.savedMs) : 'an unknown time';
      const restore = h(
        'button',
        { type: 'button', class: 'restore', 'aria-label': `Restore the version saved ${when}` },
        'Restore',
      );
      restore.addEventListener('click', () =>
        busy(restore, async () => (await api.restoreVersion({ path, version: v.id, ...within })).message),
      );
      const download = h(
        'button',
        { type: 'button', class: 'download', 'aria-label': `Download this version, saved ${when}` },
        'Download this version',
      );
      download.addEventListener('click', () =>
        busy(download, async () => (await api.downloadVersion({ path, version: v.id, ...within })).message),
      );
      return h(
        'li',
        { class: v.current ? 'version current' : 'version', 'data-version': String(v.id) },
        h('span', { class: 'when' }, when),
        h('span', { class: 'device' }, v.device ? `from ${v.device}` : 'device not known'),
        h('span', { class: 'size' }, formatBytes(v.size)),
        h('span', { class: 'version-state' }, versionState(v)),
        v.current ? null : restore,
        v.current ? null : download,
      );
    });
    return [
      h('h3', { id: 'h-versions' }, 'Versions of ', h('span', { class: 'path' }, path)),
      h(
        'p',
        { class: 'hint' },
        `Weft storage keeps replaced and deleted versions for ${r.retentionDays} days. `,
        h('a', { href: historyHash({ folder: parentOf(path), ...within }) }, 'Deleted files in this folder'),
      ),
      rows.length === 0
        ? h('p', {}, 'No versions are kept of this file.')
        : h('ul', { class: 'versions', id: 'version-list', 'aria-labelledby': 'h-versions' }, rows),
    ];
  };

  const showDeleted = (folder: string, r: DeletedFiles): Node[] => {
    if (!r.available) return [h('p', { id: 'history-unavailable' }, r.reason)];
    const rows = r.files.map((f) => {
      const restore = h(
        'button',
        { type: 'button', class: 'restore', 'aria-label': `Restore ${f.path}` },
        'Restore',
      );
      restore.addEventListener('click', () =>
        busy(
          restore,
          async () => (await api.restoreVersion({ path: f.path, version: f.version, ...within })).message,
        ),
      );
      return h(
        'li',
        { class: 'deleted-file', 'data-path': f.path },
        h('span', { class: 'path' }, f.path),
        h('span', { class: 'when' }, `Deleted ${timeText(f.deletedMs)}`),
        h('span', { class: 'device' }, f.device ? `on ${f.device}` : 'device not known'),
        h('span', { class: 'size' }, formatBytes(f.size)),
        restore,
        h(
          'a',
          { href: historyHash({ path: f.path, ...within }), 'aria-label': `Versions of ${f.path}` },
          'Versions',
        ),
      );
    });
    return [
      h(
        'h3',
        { id: 'h-deleted' },
        folder === ''
          ? `Deleted files${target.syncedFolder ? ` in ${target.syncedFolder}` : ''}`
          : `Deleted files in ${folder}`,
      ),
      h(
        'p',
        { class: 'hint' },
        `Restorable for ${r.retentionDays} days after they were deleted.`,
        r.truncated ? ' Only the first ones are listed.' : '',
      ),
      rows.length === 0
        ? h('p', { id: 'deleted-empty' }, 'No deleted files.')
        : h('ul', { class: 'versions', id: 'deleted-list', 'aria-labelledby': 'h-deleted' }, rows),
    ];
  };

  const load = (): void => {
    if ('path' in target) {
      const path = target.path;
      api.fileHistory({ path, ...within }).then((r) => {
        if (alive) renderInto(body, JSON.stringify(['v', r]), () => showVersions(path, r));
      }, failed);
    } else {
      const folder = target.folder;
      api.deletedFiles({ folder, ...within }).then((r) => {
        if (alive) renderInto(body, JSON.stringify(['d', r]), () => showDeleted(folder, r));
      }, failed);
    }
  };
  load();
}

/** The status window: folder state, transfers, errors, conflicts, activity, savings and storage. */
import type { FolderStatusDto, StorageSplit, WeftClient } from '../../common/api.ts';
import {
  DISPLAY_LABEL,
  displayState,
  formatBytes,
  formatEta,
  formatRate,
  isNotEnrolled,
  pausedUntilText,
  plainError,
  storageFull,
  usageText,
} from '../../common/format.ts';
import { Scope, h, renderInto, timeText } from '../dom.mts';
import { historyHash, historyLink } from './history.mts';

const KIND_LABEL: Record<FolderStatusDto['recent'][number]['kind'], string> = {
  added: 'Added',
  uploaded: 'Uploaded',
  downloaded: 'Downloaded',
  deleted: 'Deleted',
  moved: 'Moved',
  conflicted: 'Conflict',
  error: 'Error',
};

const files = (n: number): string => `${n} file${n === 1 ? '' : 's'}`;

export function statusScreen(
  root: HTMLElement,
  api: WeftClient,
  scope: Scope,
  report: (message: string) => void,
): (s: FolderStatusDto) => void {
  const run = (p: Promise<unknown>): void => {
    p.catch((e: unknown) => report(e instanceof Error ? e.message : String(e)));
  };
  const overview = h('div', { id: 'overview' });
  const usage = h('div', { id: 'usage' });
  const controls = h('div', { class: 'row', id: 'controls' });
  const problems = h('div', { id: 'problems' });
  const transfers = h('div', { id: 'transfers-list' });
  const conflicts = h('div', { id: 'conflicts-list' });
  const storedAs = h('div', { id: 'stored-as' });
  const search = h('input', {
    id: 'activity-search',
    type: 'search',
    placeholder: 'Search by file name',
    autocomplete: 'off',
  });
  const activity = h('div', { id: 'activity-list' });
  const savings = h('div', { id: 'savings' });
  const storage = h('div', { id: 'storage' }, h('p', {}, 'Loading…'));
  let last: FolderStatusDto | undefined;

  const loadStorage = (): void => {
    api.getStorage({}).then(
      (s: StorageSplit) =>
        renderInto(storage, JSON.stringify(s), () =>
          h(
            'dl',
            { class: 'facts' },
            h('dt', {}, 'Filesystem tier (small files)'),
            h('dd', {}, `${formatBytes(s.filesystemTierBytes)} in ${files(s.filesystemTierFiles)}`),
            h('dt', {}, 'Object tier (large files)'),
            h('dd', {}, `${formatBytes(s.objectTierBytes)} in ${files(s.objectTierFiles)}`),
          ),
        ),
      () => renderInto(storage, 'offline', () => h('p', {}, 'Not available while offline.')),
    );
  };

  root.replaceChildren(
    h('h2', {}, 'Status'),
    h(
      'section',
      { 'aria-labelledby': 'h-folder' },
      h('h3', { id: 'h-folder' }, 'Folder'),
      overview,
      usage,
      controls,
    ),
    problems,
    h(
      'section',
      { 'aria-labelledby': 'h-transfers' },
      h('h3', { id: 'h-transfers' }, 'Transfers'),
      transfers,
    ),
    h(
      'section',
      { 'aria-labelledby': 'h-conflicts' },
      h('h3', { id: 'h-conflicts' }, 'Conflicts'),
      conflicts,
    ),
    storedAs,
    h(
      'section',
      { 'aria-labelledby': 'h-activity' },
      h('h3', { id: 'h-activity' }, 'Recent activity'),
      h('label', { for: 'activity-search' }, 'Search recent activity'),
      search,
      activity,
      h('p', {}, h('a', { href: historyHash({ folder: '' }), id: 'deleted-files-link' }, 'Deleted files')),
    ),
    h(
      'section',
      { 'aria-labelledby': 'h-savings' },
      h('h3', { id: 'h-savings' }, 'Savings and storage'),
      savings,
      h('h4', {}, 'Storage split on the server'),
      storage,
      h('button', { type: 'button', id: 'storage-refresh', onclick: () => loadStorage() }, 'Refresh storage'),
    ),
  );
  loadStorage();

  const drawActivity = (s: FolderStatusDto): void => {
    const q = search.value.trim().toLowerCase();
    const rows = s.recent.filter((a) => q === '' || a.path.toLowerCase().includes(q)).slice(0, 100);
    renderInto(activity, JSON.stringify([q, rows]), () =>
      rows.length === 0
        ? h('p', {}, q ? 'No activity matches.' : 'Nothing yet.')
        : h(
            'table',
            {},
            h('caption', { class: 'sr-only' }, 'Recent activity'),
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                h('th', { scope: 'col' }, 'When'),
                h('th', { scope: 'col' }, 'What'),
                h('th', { scope: 'col' }, 'File'),
              ),
            ),
            h(
              'tbody',
              {},
              rows.map((a) =>
                h(
                  'tr',
                  { class: `kind-${a.kind}` },
                  h('td', {}, timeText(a.atMs)),
                  h('td', {}, KIND_LABEL[a.kind]),
                  h(
                    'td',
                    { class: 'path' },
                    a.folder ? `${a.folder}: ${a.path}` : a.path,
                    a.detail && a.kind !== 'conflicted' ? ` — ${a.detail}` : '',
                    ' ',
                    historyLink(a.path, a.kind, a.folder),
                  ),
                ),
              ),
            ),
          ),
    );
  };
  search.addEventListener('input', () => last && drawActivity(last));

  const update = (s: FolderStatusDto): void => {
    last = s;
    const d = displayState(s);
    const headline =
      d === 'paused' && !s.massDeletePending ? `Paused ${pausedUntilText(s, Date.now())}` : DISPLAY_LABEL[d];
    const several = (s.folders?.length ?? 0) > 1 ? (s.folders ?? []) : [];
    const server = s.server;
    // Several proxy instances: which one this computer talks to (it moves when one stops answering).
    const serverText = server
      ? `${server.url}${server.id ? ` (instance ${server.id})` : ''}${server.instances > 1 ? ` — ${server.up} of ${server.instances} instances answer` : ''}`
      : undefined;
    renderInto(
      overview,
      JSON.stringify([headline, s.folder, s.files, s.pendingOperations, several, serverText]),
      () => [
        h('p', { class: `state state-${d}`, id: 'folder-state' }, headline),
        h(
          'dl',
          { class: 'facts' },
          h('dt', {}, several.length > 0 ? 'Folders' : 'Folder'),
          several.length > 0
            ? h(
                'dd',
                {},
                h(
                  'ul',
                  { id: 'folder-states', class: 'plain' },
                  several.map((f) =>
                    h(
                      'li',
                      { 'data-folder': f.id },
                      h('span', { class: 'path' }, f.path),
                      ` — ${f.primary ? 'main folder' : f.name}: ${f.state === 'idle' && f.pendingOperations === 0 ? 'up to date' : f.state}, ${files(f.files)}`,
                    ),
                  ),
                ),
              )
            : h('dd', { class: 'path' }, s.folder),
          h('dt', {}, 'Files'),
          h('dd', {}, String(s.files)),
          h('dt', {}, 'Waiting to sync'),
          h('dd', {}, String(s.pendingOperations)),
          ...(serverText ? [h('dt', {}, 'Server'), h('dd', { id: 'server' }, serverText)] : []),
        ),
      ],
    );
    // Weft storage use: a bar against the quota, or the bytes alone when there is none.
    const u = s.storage;
    renderInto(usage, JSON.stringify([u?.usedBytes, u?.limitBytes, u?.full !== undefined]), () =>
      u === undefined
        ? []
        : h(
            'div',
            { class: `usage${u.full ? ' usage-full' : ''}` },
            h('span', { id: 'usage-text' }, `Weft storage: ${usageText(u)}`),
            u.limitBytes === null
              ? null
              : h('progress', {
                  id: 'usage-bar',
                  max: Math.max(1, u.limitBytes),
                  value: Math.min(u.usedBytes, u.limitBytes),
                  'aria-labelledby': 'usage-text',
                }),
          ),
    );
    const paused = s.state === 'paused' && !s.massDeletePending;
    renderInto(controls, JSON.stringify([paused]), () =>
      paused
        ? [
            h(
              'button',
              { type: 'button', id: 'resume', onclick: () => run(api.resume({})) },
              'Resume syncing',
            ),
          ]
        : [
            h(
              'button',
              { type: 'button', id: 'pause-1h', onclick: () => run(api.pause({ duration: '1h' })) },
              'Pause for 1 hour',
            ),
            h(
              'button',
              {
                type: 'button',
                id: 'pause-restart',
                onclick: () => run(api.pause({ duration: 'untilRestart' })),
              },
              'Pause until restart',
            ),
            h('button', { type: 'button', id: 'sync-now', onclick: () => run(api.syncNow({})) }, 'Sync now'),
          ],
    );
    const problem = s.massDeletePending
      ? 'mass'
      : s.state === 'error' || s.state === 'offline'
        ? 'error'
        : storageFull(s)
          ? 'full'
          : '';
    const problemNotice = (): HTMLElement | null => {
      if (problem === '') return null;
      const p = plainError(s.error);
      return h(
        'section',
        { 'aria-labelledby': 'h-problem', class: 'problem', role: 'alert' },
        h('h3', { id: 'h-problem' }, problem === 'mass' ? 'Many files were deleted' : 'Syncing stopped'),
        h('p', {}, problem === 'mass' ? (s.error ?? p.cause) : p.cause),
        h('p', {}, p.advice),
        problem === 'mass'
          ? h(
              'div',
              { class: 'row' },
              h(
                'button',
                { type: 'button', onclick: () => run(api.resolveMassDelete({ answer: 'delete' })) },
                'Delete them everywhere',
              ),
              h(
                'button',
                { type: 'button', onclick: () => run(api.resolveMassDelete({ answer: 'restore' })) },
                'Restore the files',
              ),
            )
          : isNotEnrolled(s.error)
            ? h('a', { href: '#accounts', id: 'go-accounts' }, 'Connect Weft storage')
            : h('button', { type: 'button', id: 'retry', onclick: () => run(api.syncNow({})) }, 'Retry now'),
        s.error
          ? h('details', {}, h('summary', {}, 'Technical details'), h('p', { class: 'path' }, s.error))
          : null,
      );
    };
    renderInto(
      problems,
      JSON.stringify([problem, problem === 'full' ? [u, s.pendingOperations] : s.error]),
      () => {
        if (problem === 'full') return fullNotice(s, () => run(api.syncNow({})));
        return problemNotice();
      },
    );
    renderInto(transfers, JSON.stringify(s.transfers), () =>
      s.transfers.length === 0
        ? h('p', {}, 'No transfers right now.')
        : h(
            'ul',
            { class: 'transfers' },
            s.transfers.map((t, i) => {
              const pct = Math.round((t.bytesDone / Math.max(1, t.bytesTotal)) * 100);
              const id = `transfer-${i}`;
              return h(
                'li',
                {},
                h(
                  'span',
                  { id, class: 'path' },
                  `${t.direction === 'up' ? 'Uploading' : 'Downloading'} ${t.folder ? `${t.folder}: ` : ''}${t.path}`,
                ),
                h('progress', { max: t.bytesTotal, value: t.bytesDone, 'aria-labelledby': id }),
                h(
                  'span',
                  {},
                  `${pct}% · ${formatBytes(t.bytesDone)} of ${formatBytes(t.bytesTotal)} · ${formatRate(t.rate)} · ${formatEta(t.etaSeconds)}`,
                ),
              );
            }),
          ),
    );
    // Names this computer cannot hold, stored under look-alike names (shown only when there are any).
    const renamed = s.storedAs ?? [];
    renderInto(storedAs, JSON.stringify(renamed), () =>
      renamed.length === 0
        ? []
        : h(
            'section',
            { 'aria-labelledby': 'h-stored-as' },
            h('h3', { id: 'h-stored-as' }, 'Stored under other names'),
            h(
              'ul',
              { class: 'stored-as' },
              renamed.map((x) => h('li', { class: 'stored-as-item', title: x.path }, x.notice)),
            ),
          ),
    );
    renderInto(conflicts, JSON.stringify(s.conflicts), () =>
      s.conflicts.length === 0
        ? h('p', {}, 'No conflicts.')
        : h(
            'ul',
            { class: 'conflicts' },
            s.conflicts.map((c) =>
              h(
                'li',
                { class: 'conflict' },
                h(
                  'p',
                  {},
                  h('strong', { class: 'path' }, c.folder ? `${c.folder}: ${c.path}` : c.path),
                  ` was changed in two places (${timeText(c.atMs)}). The other version is `,
                  h('span', { class: 'path' }, c.copyPath),
                  '. ',
                  historyLink(c.path, 'conflicted', c.folder),
                ),
                h(
                  'div',
                  { class: 'row', role: 'group', 'aria-label': `Resolve ${c.path}` },
                  (['mine', 'theirs', 'both'] as const).map((keep) =>
                    h(
                      'button',
                      {
                        type: 'button',
                        'data-keep': keep,
                        'aria-label': `Keep ${keep}: ${c.path}`,
                        onclick: () =>
                          run(
                            api.resolveConflict({
                              path: c.path,
                              keep,
                              ...(c.folder ? { folder: c.folder } : {}),
                            }),
                          ),
                      },
                      keep === 'both' ? 'Keep both' : keep === 'mine' ? 'Keep mine' : 'Keep theirs',
                    ),
                  ),
                ),
              ),
            ),
          ),
    );
    drawActivity(s);
    renderInto(savings, JSON.stringify([s.savings, s.bytesUploaded, s.bytesDownloaded]), () =>
      h(
        'dl',
        { class: 'facts' },
        h('dt', {}, 'Not sent thanks to deltas'),
        h('dd', {}, formatBytes(s.savings.deltaBytesSaved)),
        h('dt', {}, 'Requests saved by bundling small files'),
        h('dd', {}, String(s.savings.requestsSavedByBundling)),
        h('dt', {}, 'Operations eliminated in the queue'),
        h('dd', {}, String(s.savings.operationsEliminated)),
        h('dt', {}, 'Uploaded / downloaded'),
        h('dd', {}, `${formatBytes(s.bytesUploaded)} / ${formatBytes(s.bytesDownloaded)}`),
      ),
    );
  };
  scope.add(() => undefined);
  return update;
}

/** Weft storage is full: what happened, what still works, what to do, and "check again". */
function fullNotice(s: FolderStatusDto, checkAgain: () => void): HTMLElement {
  const u = s.storage;
  const waiting = s.pendingOperations === 1 ? '1 change waits' : `${s.pendingOperations} changes wait`;
  const next = u?.full ? new Date(u.full.nextCheckMs).toLocaleTimeString() : undefined;
  return h(
    'section',
    { 'aria-labelledby': 'h-problem', class: 'problem', role: 'alert', id: 'storage-full' },
    h('h3', { id: 'h-problem' }, 'Weft storage is full'),
    h(
      'p',
      {},
      `There is no room for new uploads${u ? ` (${usageText(u)})` : ''}. ${waiting} to upload; nothing is lost.`,
    ),
    h(
      'p',
      {},
      'Downloads and deletes go on. To make room, delete files you no longer need from this folder, ' +
        'or ask whoever runs your Weft server for more space.',
    ),
    h(
      'p',
      {},
      `Weft checks again by itself${next ? ` (next at ${next})` : ''} and uploads as soon as there is room.`,
    ),
    h('button', { type: 'button', id: 'check-storage', onclick: checkAgain }, 'Check again now'),
  );
}

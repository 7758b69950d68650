/**
 * Storage health (docs/desktop.md; issue #17): when Weft storage keeps files on several
 * backends, which there are, their class, their state (available / degraded / down since
 * …), how your own files stand, and what would happen to them if one more backend failed.
 * Only your files are counted; refreshed every 30 seconds while shown.
 */
import type { StorageHealthView, WeftClient } from '../../common/api.ts';
import { Scope, h, renderInto, timeText } from '../dom.mts';

const REFRESH_MS = 30_000;

type Redundant = Extract<StorageHealthView, { redundant: true }>;
type BackendView = Redundant['backends'][number];

const STATE_WORDS: Record<Redundant['state'], string> = {
  available: 'All your files are fully protected',
  degraded: 'All your files can be read, with less protection than usual',
  down: 'Some of your files cannot be read until a backend returns',
};

const CLASS_WORDS: Record<BackendView['class'], string> = {
  performance: 'Performance-oriented',
  cost: 'Cost-oriented',
};

function files(n: number): string {
  return `${n} file${n === 1 ? '' : 's'}`;
}

/** "Available", "Down since 28/11/2026, 07:31:02", "Degraded since …" (missed writes being caught up). */
export function backendStateText(b: BackendView): string {
  const since = b.sinceMs === undefined ? '' : ` since ${timeText(b.sinceMs)}`;
  if (b.state === 'down') return `Down${since}`;
  if (b.state === 'degraded') return `Degraded${since} — catching up on what it missed`;
  return 'Available';
}

/** What one more failure, of this backend, would do to your files. */
export function ifFailsText(view: Redundant, b: BackendView): string {
  if (b.state === 'down') return 'Already down: your files are read from the other backends.';
  const r = view.ifFails.find((f) => f.backend === b.id);
  if (!r || view.files.total === 0) return 'If it fails too: none of your files depend on it.';
  if (r.unreadable > 0)
    return `If it fails too: ${files(r.unreadable)} of yours could not be read until a backend returns.`;
  if (r.atMinimum > 0)
    return `If it fails too: every file of yours stays readable, but ${files(r.atMinimum)} would have no spare copy left.`;
  return 'If it fails too: every file of yours stays readable, with copies to spare.';
}

function redundantView(v: Redundant): Node[] {
  const f = v.files;
  return [
    h(
      'section',
      { 'aria-labelledby': 'h-storage-files' },
      h('h3', { id: 'h-storage-files' }, 'Your files'),
      h(
        'p',
        { class: `state health-${v.state}`, id: 'storage-state' },
        f.total === 0 ? 'None of your files are kept on these backends yet' : STATE_WORDS[v.state],
      ),
      h(
        'dl',
        { class: 'facts', id: 'storage-files' },
        h('dt', {}, 'Kept on these backends'),
        h('dd', {}, files(f.total)),
        h('dt', {}, 'Fully protected'),
        h('dd', {}, files(f.whole)),
        h('dt', {}, 'With a spare copy left'),
        h('dd', {}, files(f.reduced)),
        h('dt', {}, 'One failure from being unreadable'),
        h('dd', {}, files(f.atMinimum)),
        h('dt', {}, 'Cannot be read now'),
        h('dd', {}, files(f.unreadable)),
      ),
      h(
        'p',
        { class: 'hint', id: 'storage-scrub' },
        v.lastScrubMs === undefined
          ? 'The server has not finished a full check of its copies yet.'
          : `Last full check of every copy: ${timeText(v.lastScrubMs)}.`,
        ' Small files kept on the server’s own disk are not counted here.',
      ),
    ),
    h(
      'section',
      { 'aria-labelledby': 'h-storage-backends' },
      h('h3', { id: 'h-storage-backends' }, 'Backends'),
      h(
        'p',
        { class: 'hint' },
        'Weft storage keeps each file on several of these: whole copies of small items on performance-oriented backends, and pieces of large files on cost-oriented ones, where enough of the pieces rebuild the file.',
      ),
      h(
        'ul',
        { class: 'backends', id: 'storage-backends' },
        ...v.backends.map((b) =>
          h(
            'li',
            { 'data-backend': b.id, 'data-state': b.state },
            h('span', { class: 'name' }, b.id),
            h('span', { class: 'backend-class' }, CLASS_WORDS[b.class]),
            h('span', { class: `backend-state health-${b.state}` }, backendStateText(b)),
            h('span', { class: 'backend-risk' }, ifFailsText(v, b)),
          ),
        ),
      ),
    ),
  ];
}

export function storageHealthScreen(
  root: HTMLElement,
  api: WeftClient,
  scope: Scope,
  report: (m: string) => void,
): void {
  const body = h('div', { id: 'storage-health' }, h('p', {}, 'Loading…'));
  root.replaceChildren(h('h2', {}, 'Storage health'), body);
  const load = (): void => {
    api.getStorageHealth({}).then(
      (v: StorageHealthView) => {
        // The check time changes every load: leave it out of the key, so focus and scroll stay.
        const key = JSON.stringify(v.available && v.redundant ? { ...v, checkedAtMs: 0 } : v);
        renderInto(body, key, () => {
          if (!v.available) return h('p', { id: 'storage-unavailable' }, `Not available: ${v.reason}`);
          if (!v.redundant)
            return h(
              'p',
              { id: 'storage-single' },
              'Your Weft server keeps your files on a single storage backend, so there is no redundancy to show here.',
            );
          return redundantView(v);
        });
      },
      (e: unknown) => report(e instanceof Error ? e.message : String(e)),
    );
  };
  load();
  const timer = setInterval(load, REFRESH_MS);
  scope.add(() => clearInterval(timer));
}

/**
 * Settings → Choose folders (selective sync): the folders of the Weft storage as a tree of
 * checkboxes. A cleared folder stays in Weft storage and on the other devices; this
 * computer uploads what changed in it, then removes its copy to free the space. A folder
 * ticked again is downloaded. Subfolders load when their parent is opened; the subfolders
 * of a cleared folder are shown cleared (tick the parent first to choose among them).
 * Nothing changes until "Apply folder choice".
 */
import type { SelectiveFolder, SelectiveSync, WeftClient } from '../../common/api.ts';
import { Scope, h, renderInto } from '../dom.mts';

const REFRESH_MS = 2_000;

const STATE_TEXT: Record<NonNullable<SelectiveFolder['state']>, string> = {
  leaving: 'Removing from this computer once its changes are uploaded',
  excluded: 'Not on this computer',
  including: 'Downloading to this computer',
};

/** `p` is `q` or inside it. */
const within = (p: string, q: string): boolean => p === q || p.startsWith(q + '/');

export function selectiveSyncSection(
  root: HTMLElement,
  api: WeftClient,
  scope: Scope,
  report: (m: string) => void,
): void {
  const fail = (e: unknown): void => report(e instanceof Error ? e.message : String(e));
  const tree = h('div', { id: 'selective-tree' });
  const note = h('p', { id: 'selective-note', role: 'status' });
  const saved = h('p', { id: 'selective-saved', role: 'status' });
  const apply = h('button', { type: 'button', id: 'selective-apply', hidden: true }, 'Apply folder choice');
  const section = h(
    'section',
    { id: 'selective-sync', 'aria-labelledby': 'h-selective' },
    h('h3', { id: 'h-selective' }, 'Choose folders'),
    h(
      'p',
      { class: 'hint', id: 'selective-hint' },
      'Clear a folder to keep it off this computer: it stays in Weft storage and on your other devices, and its space here is freed once what changed in it is uploaded. Tick it again to download it.',
    ),
    note,
    tree,
    apply,
    saved,
  );
  root.append(section);

  /** The folders listed per parent ('' = the top). */
  const children = new Map<string, SelectiveFolder[]>();
  const expanded = new Set<string>();
  /** The server's states of the folders chosen by their own entry. */
  let states = new Map<string, NonNullable<SelectiveFolder['state']>>();
  /** The choice being edited: folders to leave out. */
  let excluded = new Set<string>();
  /** The person changed the choice and has not applied it yet. */
  let edited = false;
  const ids = new Map<string, number>();
  const idOf = (p: string): string => {
    if (!ids.has(p)) ids.set(p, ids.size);
    return `sel-${ids.get(p)}`;
  };
  const leftOut = (p: string): string | undefined => [...excluded].find((q) => within(p, q));

  /** Known once the first answer came: folders can be chosen (this computer is enrolled). */
  let available: boolean | undefined;
  const take = (v: SelectiveSync): void => {
    available = v.available;
    if (!v.available) {
      note.textContent = v.reason ?? 'Connect Weft storage first (Accounts).';
      return;
    }
    children.set(v.parent, v.folders);
    states = new Map(v.excluded.map((e) => [e.path, e.state]));
    if (!edited) excluded = new Set(v.excluded.filter((e) => e.state !== 'including').map((e) => e.path));
    note.textContent = v.offline
      ? 'Weft storage cannot be reached: showing the folders this computer knows.'
      : '';
  };

  const toggle = (p: string, keep: boolean): void => {
    edited = true;
    saved.textContent = '';
    for (const q of [...excluded]) if (within(q, p)) excluded.delete(q);
    if (!keep) excluded.add(p);
    draw();
  };

  const expand = async (p: string): Promise<void> => {
    if (expanded.has(p)) expanded.delete(p);
    else {
      expanded.add(p);
      if (!children.has(p)) take(await api.getSelectiveSync({ parent: p }));
    }
    draw();
  };

  const list = (parent: string): HTMLElement => {
    const folders = children.get(parent) ?? [];
    return h(
      'ul',
      { class: 'folder-tree', id: `${parent === '' ? 'sel-top' : idOf(parent)}-children` },
      folders.length === 0
        ? h('li', { class: 'hint' }, parent === '' ? 'No folders in Weft storage yet.' : 'No subfolders.')
        : folders.map((f) => item(f)),
    );
  };

  const item = (f: SelectiveFolder): HTMLElement => {
    const id = idOf(f.path);
    const by = leftOut(f.path);
    const checked = by === undefined;
    const underCleared = by !== undefined && by !== f.path;
    const state = states.get(f.path);
    const pendingText =
      by === f.path && state !== 'leaving' && state !== 'excluded'
        ? 'Will be removed from this computer when you apply'
        : checked && (state === 'leaving' || state === 'excluded')
          ? 'Will be downloaded when you apply'
          : state !== undefined
            ? STATE_TEXT[state]
            : '';
    const open = expanded.has(f.path);
    return h(
      'li',
      { 'data-path': f.path },
      h('input', {
        type: 'checkbox',
        id,
        checked,
        disabled: underCleared,
        'aria-describedby': pendingText ? `${id}-state` : undefined,
        onchange: (e: Event) => toggle(f.path, (e.target as HTMLInputElement).checked),
      }),
      h('label', { for: id, class: 'inline' }, f.name),
      pendingText && h('span', { class: 'folder-state hint', id: `${id}-state` }, pendingText),
      h(
        'button',
        {
          type: 'button',
          class: 'folder-expand',
          id: `${id}-expand`,
          'aria-expanded': open ? 'true' : 'false',
          'aria-controls': open ? `${id}-children` : undefined,
          onclick: () => void expand(f.path).catch(fail),
        },
        open ? `Hide subfolders of ${f.name}` : `Subfolders of ${f.name}`,
      ),
      open && list(f.path),
    );
  };

  const draw = (): void => {
    const key = JSON.stringify([[...children], [...expanded], [...states], [...excluded].sort(), edited]);
    renderInto(tree, available ? key : '', () => (available ? list('') : []));
    apply.hidden = available !== true;
    apply.disabled = !edited;
  };

  const refresh = async (): Promise<void> => {
    take(await api.getSelectiveSync({}));
    for (const p of expanded) take(await api.getSelectiveSync({ parent: p }));
    draw();
  };

  apply.addEventListener('click', () => {
    apply.disabled = true;
    api
      .setSelectiveSync({ excluded: [...excluded].sort() })
      .then((v) => {
        edited = false;
        take(v);
        draw();
        saved.textContent =
          'Applied. Cleared folders leave this computer once what changed in them is uploaded; ticked folders are downloaded.';
      })
      .catch((e: unknown) => {
        apply.disabled = false;
        fail(e);
      });
  });

  // While a folder is leaving or coming back, show its progress.
  const timer = setInterval(() => {
    if ([...states.values()].some((s) => s !== 'excluded')) refresh().catch(fail);
  }, REFRESH_MS);
  scope.add(() => clearInterval(timer));
  refresh().catch(fail);
}

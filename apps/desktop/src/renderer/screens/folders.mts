/**
 * Settings → Synced folders: the main Weft folder and the folders added beside it, each
 * with its state; "Add folder" (a path typed here, or "Choose…" in the desktop app, and an
 * optional name in Weft storage) and "Stop syncing" after a confirmation in place. Stopping
 * deletes nothing, here or in Weft storage; the screen says so before and after.
 */
import type { SyncedFolder, SyncedFolders, WeftClient } from '../../common/api.ts';
import { Scope, h, renderInto } from '../dom.mts';

/** What the desktop app's preload adds (absent in the browser). */
interface Picker {
  pickFolder?: () => Promise<string | null>;
}

const STATE_LABEL: Record<SyncedFolder['state'], string> = {
  idle: 'Up to date',
  scanning: 'Looking for changes',
  syncing: 'Syncing',
  paused: 'Paused',
  offline: 'Offline',
  error: 'Needs attention',
  removed: 'Removed from your Weft account',
  full: 'Weft storage is full',
};

const stateText = (f: SyncedFolder): string => {
  const label = f.state === 'idle' && f.pendingOperations > 0 ? 'Syncing' : STATE_LABEL[f.state];
  const files = `${f.files} ${f.files === 1 ? 'file' : 'files'}`;
  return `${label} · ${files}${f.error ? ` · ${f.error}` : ''}`;
};

export function foldersSection(
  root: HTMLElement,
  api: WeftClient,
  scope: Scope,
  report: (m: string) => void,
): void {
  const fail = (e: unknown): void => report(e instanceof Error ? e.message : String(e));
  const list = h('div', { id: 'folders' });
  const note = h('p', { id: 'folders-note', role: 'status' });
  const path = h('input', {
    id: 'add-folder-path',
    name: 'path',
    type: 'text',
    spellcheck: false,
    autocomplete: 'off',
    required: true,
    'aria-describedby': 'add-folder-path-hint add-folder-error',
  });
  const name = h('input', {
    id: 'add-folder-name',
    name: 'name',
    type: 'text',
    spellcheck: false,
    autocomplete: 'off',
    'aria-describedby': 'add-folder-name-hint',
  });
  const error = h('p', { id: 'add-folder-error', class: 'error', role: 'alert' });
  const picker = (window as unknown as { weft?: Picker }).weft;
  const choose = picker?.pickFolder
    ? h(
        'button',
        {
          type: 'button',
          id: 'add-folder-choose',
          onclick: () => {
            picker.pickFolder?.().then((p) => {
              if (p) path.value = p;
              path.focus();
            }, fail);
          },
        },
        'Choose…',
      )
    : null;
  const form = h(
    'form',
    { id: 'add-folder', 'aria-labelledby': 'h-add-folder', novalidate: true },
    h('h4', { id: 'h-add-folder' }, 'Add a folder'),
    h('label', { for: 'add-folder-path' }, 'Folder on this computer'),
    h('div', { class: 'row' }, path, choose),
    h(
      'p',
      { class: 'hint', id: 'add-folder-path-hint' },
      'Its whole path, for example ~/Photos. An existing folder, not inside another synced folder.',
    ),
    h('label', { for: 'add-folder-name' }, 'Name in Weft storage (optional)'),
    name,
    h(
      'p',
      { class: 'hint', id: 'add-folder-name-hint' },
      'Default: the folder’s own name. Your other devices sync it with a folder they add under the same name.',
    ),
    error,
    h('button', { type: 'submit', id: 'add-folder-submit' }, 'Add folder'),
  );
  const section = h(
    'section',
    { id: 'synced-folders', 'aria-labelledby': 'h-folders' },
    h('h3', { id: 'h-folders' }, 'Synced folders'),
    h(
      'p',
      { class: 'hint', id: 'folders-hint' },
      'Each folder syncs on its own, with its own place in Weft storage. Stopping a folder deletes nothing: its files stay on this computer and in Weft storage.',
    ),
    list,
    note,
    form,
  );
  // Right under the screen's title, above the other settings.
  const title = root.querySelector('h2');
  if (title) title.after(section);
  else root.prepend(section);

  let shown: SyncedFolder[] = [];
  /** The folder whose removal waits for a confirmation, if any. */
  let confirming: string | undefined;
  const draw = (folders: SyncedFolder[]): void => {
    shown = folders;
    renderInto(list, JSON.stringify([folders, confirming]), () =>
      h('ul', { class: 'accounts', id: 'folder-list', 'aria-labelledby': 'h-folders' }, ...folders.map(item)),
    );
  };
  const item = (f: SyncedFolder): HTMLElement => {
    const label = f.primary ? 'Main Weft folder' : f.name;
    const nameId = `folder-name-${f.id}`;
    return h(
      'li',
      { class: 'account folder', 'data-folder': f.id },
      h('span', { class: 'name', id: nameId }, label),
      h('span', { class: 'path' }, f.path),
      h('span', { class: 'account-state', 'data-state': f.state }, stateText(f)),
      f.primary
        ? null
        : confirming === f.id
          ? h(
              'div',
              { class: 'confirm', role: 'group', 'aria-labelledby': `confirm-folder-${f.id}` },
              h(
                'p',
                { id: `confirm-folder-${f.id}` },
                `Stop syncing “${f.name}”? Nothing is deleted: its files stay in ${f.path} and in Weft storage, and your other devices keep syncing it.`,
              ),
              h(
                'button',
                { type: 'button', class: 'danger', id: 'confirm-remove-folder', onclick: () => remove(f) },
                'Stop syncing',
              ),
              h(
                'button',
                { type: 'button', id: 'cancel-remove-folder', onclick: () => ask(undefined) },
                'Cancel',
              ),
            )
          : h(
              'button',
              { type: 'button', 'aria-describedby': nameId, onclick: () => ask(f.id) },
              `Stop syncing ${f.name}`,
            ),
    );
  };
  const ask = (id: string | undefined): void => {
    const back = confirming;
    confirming = id;
    note.textContent = '';
    draw(shown);
    if (id) document.getElementById('confirm-remove-folder')?.focus();
    else if (back)
      (document.querySelector(`li[data-folder="${back}"] button`) as HTMLElement | null)?.focus();
  };
  const remove = (f: SyncedFolder): void => {
    confirming = undefined;
    api.removeFolder({ id: f.id }).then((r: SyncedFolders) => {
      draw(r.folders);
      note.textContent = `“${f.name}” is no longer synced. Its files are still in ${f.path} and in Weft storage.`;
      path.focus();
    }, fail);
  };
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    error.textContent = '';
    path.removeAttribute('aria-invalid');
    const typed = path.value.trim();
    if (typed === '') {
      error.textContent = 'Type the folder’s path.';
      path.setAttribute('aria-invalid', 'true');
      path.focus();
      return;
    }
    const wanted = name.value.trim();
    api.addFolder({ path: typed, ...(wanted ? { name: wanted } : {}) }).then(
      (r) => {
        draw(r.folders);
        const added = r.folders[r.folders.length - 1];
        note.textContent = added ? `“${added.name}” is synced now (${added.path}).` : '';
        path.value = '';
        name.value = '';
      },
      (err: unknown) => {
        // A refusal says why; the form keeps what was typed.
        error.textContent = err instanceof Error ? err.message : String(err);
        path.setAttribute('aria-invalid', 'true');
        path.focus();
      },
    );
  });

  // States follow the status stream; the list itself is read at start and after each change.
  const off = api.onStatus((s) => {
    if (s.folders && JSON.stringify(s.folders.map((f) => f.id)) === JSON.stringify(shown.map((f) => f.id)))
      draw(s.folders);
  });
  scope.add(off);
  api.listFolders({}).then((r) => draw(r.folders), fail);
}

/**
 * Settings: bandwidth limits, ignore patterns, mass-delete threshold, local trash limits,
 * start at login. The synced folders (folders.mts) and selective sync have their own sections.
 */
import type { Settings, WeftClient } from '../../common/api.ts';
import { Scope, h } from '../dom.mts';

export function settingsScreen(
  root: HTMLElement,
  api: WeftClient,
  _scope: Scope,
  report: (m: string) => void,
): void {
  const fail = (e: unknown): void => report(e instanceof Error ? e.message : String(e));
  const saved = h('p', { id: 'settings-saved', role: 'status' });
  const form = h('form', { id: 'settings-form', novalidate: true });
  root.replaceChildren(h('h2', {}, 'Settings'), form, saved);
  const num = (
    id: string,
    label: string,
    value: number,
    min: number,
    max: number,
    hint: string,
  ): HTMLElement[] => [
    h('label', { for: id }, label),
    h('input', {
      id,
      name: id,
      type: 'number',
      inputmode: 'numeric',
      min,
      max,
      step: 1,
      value,
      'aria-describedby': `${id}-hint`,
    }),
    h('p', { class: 'hint', id: `${id}-hint` }, hint),
  ];
  const draw = (s: Settings): void => {
    form.replaceChildren(
      h(
        'fieldset',
        {},
        h('legend', {}, 'Bandwidth'),
        ...num(
          'upload-limit',
          'Upload limit (KiB/s)',
          s.uploadLimitKiBps,
          0,
          10_000_000,
          '0 means no limit.',
        ),
        ...num(
          'download-limit',
          'Download limit (KiB/s)',
          s.downloadLimitKiBps,
          0,
          10_000_000,
          '0 means no limit.',
        ),
      ),
      h(
        'fieldset',
        {},
        h('legend', {}, 'Ignored files'),
        h('label', { for: 'ignore-patterns' }, 'Ignore patterns, one per line (gitignore style)'),
        h('textarea', { id: 'ignore-patterns', rows: 5, spellcheck: false }, s.ignorePatterns.join('\n')),
      ),
      h(
        'fieldset',
        {},
        h('legend', {}, 'Safety'),
        ...num(
          'mass-percent',
          'Ask before deleting more than this share of files (%)',
          s.massDeletePercent,
          1,
          100,
          'Syncing pauses and asks you first.',
        ),
        ...num(
          'mass-count',
          '…and more than this many files',
          s.massDeleteCount,
          10,
          10_000_000,
          'At least 10.',
        ),
        ...num(
          'trash-days',
          'Keep replaced and deleted files in the local trash for (days)',
          s.trashKeepDays,
          1,
          3650,
          'Older ones are removed for good.',
        ),
        ...num(
          'trash-limit',
          'Local trash size limit (MiB)',
          s.trashLimitMiB,
          0,
          1_000_000_000,
          '0 means automatic: 10 % of the disk, at most 10 GiB. The oldest go first.',
        ),
      ),
      h(
        'fieldset',
        {},
        h('legend', {}, 'Startup'),
        h('input', { id: 'start-at-login', type: 'checkbox', checked: s.startAtLogin }),
        h('label', { for: 'start-at-login', class: 'inline' }, 'Start Weft when I log in (desktop app)'),
      ),
      h('button', { type: 'submit', id: 'settings-save' }, 'Save settings'),
    );
  };
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const v = (id: string): string =>
      (document.getElementById(id) as HTMLInputElement | HTMLTextAreaElement).value;
    api
      .setSettings({
        uploadLimitKiBps: Number(v('upload-limit')),
        downloadLimitKiBps: Number(v('download-limit')),
        ignorePatterns: v('ignore-patterns')
          .split('\n')
          .map((l) => l.trim())
          .filter((l) => l !== ''),
        massDeletePercent: Number(v('mass-percent')),
        massDeleteCount: Number(v('mass-count')),
        trashKeepDays: Number(v('trash-days')),
        trashLimitMiB: Number(v('trash-limit')),
        startAtLogin: (document.getElementById('start-at-login') as HTMLInputElement).checked,
      })
      .then(() => {
        saved.textContent =
          'Saved. Bandwidth limits and ignore patterns apply now; the delete safety limits the next time Weft starts; the trash limits at its next clean-up (within the hour).';
      }, fail);
  });
  api.getSettings({}).then(draw, fail);
}

/**
 * The compact tray popover (Dropbox's and Nextcloud's shape): the state line, the transfers
 * under way with progress bars, the last few changes, pause or resume, open the folder, open
 * the full window. It draws common/tray-state.ts's trayPopover() — the model the Electron
 * tray menu is built from too — so both show the same thing.
 *
 * What only the shell can do (open the folder in the file manager, open the window) goes
 * through `host`: Electron's preload in the desktop app; in a browser, the window is another
 * tab and the agent opens the folder (where it cannot, the folder's path is copied).
 */
import type { CostView, FolderStatusDto, WeftClient } from '../../common/api.ts';
import { type TrayAction, type TrayPopover, trayPopover } from '../../common/tray-state.ts';
import { type Scope, h, renderInto, timeText } from '../dom.mts';

export interface TrayHost {
  /** Open the synced folder in the file manager; false: this host cannot (a browser). */
  openFolder(folder: string): Promise<boolean>;
  /** Open the full Weft window. */
  openWindow(): void;
}

/** "just now", "4 min ago", "2 h ago", else the date. */
export function agoText(atMs: number, now: number): string {
  const s = Math.max(0, Math.round((now - atMs) / 1000));
  if (s < 60) return 'just now';
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ago`;
  return timeText(atMs);
}

export function trayPopoverView(
  root: HTMLElement,
  api: WeftClient,
  host: TrayHost,
  scope: Scope,
  report: (m: string) => void,
): (s: FolderStatusDto) => void {
  const fail = (e: unknown): void => report(e instanceof Error ? e.message : String(e));
  const head = h('header', { class: 'tray-head', id: 'tray-head' });
  const transfers = h('section', { 'aria-labelledby': 'h-tray-transfers', id: 'tray-transfers' });
  const changes = h('section', { 'aria-labelledby': 'h-tray-changes', id: 'tray-changes' });
  const actions = h('div', { class: 'tray-actions', id: 'tray-actions' });
  const said = h('p', { id: 'tray-said', role: 'status', class: 'hint' });
  root.replaceChildren(head, transfers, changes, actions, said);

  let last: FolderStatusDto | undefined;
  let cost: CostView | undefined;

  const act = (a: TrayAction): void => {
    said.textContent = '';
    if (a.type === 'pause') api.pause({ duration: a.duration }).then(draw, fail);
    else if (a.type === 'resume') api.resume({}).then(draw, fail);
    else if (a.type === 'openStatus') host.openWindow();
  };
  const openFolder = (): void => {
    const folder = last?.folder ?? '';
    host.openFolder(folder).then((opened) => {
      if (opened) return;
      const done = (): void =>
        void (said.textContent = `The folder cannot be opened from here; its path is copied — ${folder}`);
      if (navigator.clipboard) navigator.clipboard.writeText(folder).then(done, done);
      else done();
    }, fail);
  };

  const drawHead = (p: TrayPopover): void =>
    renderInto(head, JSON.stringify([p.display, p.stateLine, p.detail, p.cost]), () => [
      h('span', { class: `tray-dot state-${p.display}`, 'aria-hidden': 'true' }),
      h(
        'div',
        {},
        h(
          'h1',
          { id: 'tray-state', class: `state-${p.display}` },
          p.stateLine.replace(/^./, (c) => c.toUpperCase()),
        ),
        h('p', { id: 'tray-detail' }, p.detail),
        p.cost ? h('p', { id: 'tray-cost' }, p.cost) : null,
      ),
    ]);

  const drawTransfers = (p: TrayPopover): void =>
    renderInto(transfers, JSON.stringify([p.transfers, p.moreTransfers]), () => [
      h('h2', { id: 'h-tray-transfers' }, 'Transfers'),
      p.transfers.length === 0
        ? h('p', { class: 'tray-empty' }, 'Nothing being transferred.')
        : h(
            'ul',
            { id: 'tray-transfer-list' },
            p.transfers.map((t, i) =>
              h(
                'li',
                { class: 'tray-transfer', 'data-path': t.path },
                h('span', { id: `tray-t-${i}` }, `${t.direction === 'up' ? '↑' : '↓'} ${t.name}`),
                h('progress', {
                  max: 1,
                  value: t.fraction,
                  'aria-label': t.label,
                  'aria-describedby': `tray-t-${i}-detail`,
                }),
                h('span', { class: 'hint', id: `tray-t-${i}-detail` }, t.detail),
              ),
            ),
          ),
      p.moreTransfers > 0 ? h('p', { class: 'hint' }, `and ${p.moreTransfers} more`) : null,
    ]);

  const drawChanges = (p: TrayPopover, now: number): void =>
    renderInto(changes, JSON.stringify([p.changes, Math.floor(now / 60_000)]), () => [
      h('h2', { id: 'h-tray-changes' }, 'Recent changes'),
      p.changes.length === 0
        ? h('p', { class: 'tray-empty' }, 'Nothing yet.')
        : h(
            'ul',
            { id: 'tray-change-list' },
            p.changes.map((c) =>
              h(
                'li',
                { class: `tray-change kind-${c.kind}` },
                `${c.verb} `,
                h('span', { class: 'path' }, c.path),
                h('span', { class: 'hint' }, agoText(c.atMs, now)),
              ),
            ),
          ),
    ]);

  const pauseButtons = (pause: TrayPopover['pause']): HTMLElement[] => {
    if (pause.kind === 'pause')
      return pause.choices.map((c, i) =>
        h(
          'button',
          { type: 'button', id: `tray-pause-${i}`, onclick: () => act(c.action) },
          `Pause ${c.label.toLowerCase()}`,
        ),
      );
    const { action } = pause;
    return [
      h('button', { type: 'button', id: `tray-${pause.kind}`, onclick: () => act(action) }, pause.label),
    ];
  };

  const drawActions = (p: TrayPopover): void =>
    renderInto(actions, JSON.stringify(p.pause), () => [
      ...pauseButtons(p.pause),
      h('button', { type: 'button', id: 'tray-open-folder', onclick: openFolder }, 'Open folder'),
      h(
        'button',
        { type: 'button', id: 'tray-open-window', onclick: () => host.openWindow() },
        'Open Weft window',
      ),
    ]);

  function draw(s: FolderStatusDto): void {
    last = s;
    const now = Date.now();
    const p = trayPopover(s, now, cost);
    drawHead(p);
    drawTransfers(p);
    drawChanges(p, now);
    drawActions(p);
    document.title = `Weft — ${p.stateLine}`;
  }

  // The bill, when the server tells (every 10 minutes, like the tray menu); "ago" texts age.
  const readCost = (): void =>
    void api.getCost({}).then(
      (c) => {
        cost = c;
        if (last) draw(last);
      },
      () => undefined,
    );
  readCost();
  const costTimer = setInterval(readCost, 10 * 60_000);
  const ageTimer = setInterval(() => last && draw(last), 30_000);
  scope.add(() => {
    clearInterval(costTimer);
    clearInterval(ageTimer);
  });
  return draw;
}

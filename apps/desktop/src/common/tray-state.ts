/**
 * What the tray shows: the icon for a status, the menu items, and which notifications a
 * status change deserves. Pure functions; Electron main only maps them onto Tray/Menu.
 */
import type { CostView, FolderStatusDto } from './api.ts';
import {
  DISPLAY_LABEL,
  type DisplayState,
  displayState,
  isNotEnrolled,
  pausedUntilText,
  usd,
} from './format.ts';

export type TrayIcon = 'up-to-date' | 'syncing' | 'paused' | 'offline' | 'error' | 'conflict';

export interface TrayState {
  readonly icon: TrayIcon;
  /** Overall progress 0..1 while syncing (drawn on the icon), undefined otherwise. */
  readonly progress: number | undefined;
  readonly tooltip: string;
}

const ICON: Record<DisplayState, TrayIcon> = {
  upToDate: 'up-to-date',
  syncing: 'syncing',
  paused: 'paused',
  offline: 'offline',
  error: 'error',
  conflict: 'conflict',
  full: 'error',
};

export function trayState(s: FolderStatusDto, now: number): TrayState {
  const d = displayState(s);
  let progress: number | undefined;
  if (d === 'syncing') {
    const total = s.transfers.reduce((a, t) => a + t.bytesTotal, 0);
    const done = s.transfers.reduce((a, t) => a + t.bytesDone, 0);
    progress = total > 0 ? Math.min(1, done / total) : 0;
  }
  let tooltip = `Weft — ${DISPLAY_LABEL[d]}`;
  if (d === 'syncing') tooltip += ` (${s.pendingOperations} waiting)`;
  if (d === 'paused' && !s.massDeletePending) tooltip += ` ${pausedUntilText(s, now)}`;
  if (d === 'conflict')
    tooltip = `Weft — ${s.conflicts.length} conflict${s.conflicts.length === 1 ? '' : 's'}`;
  if (isNotEnrolled(s.error)) tooltip = 'Weft — not connected to Weft storage yet';
  return { icon: ICON[d], progress, tooltip };
}

export type TrayAction =
  | { readonly type: 'openFolder' }
  | { readonly type: 'openStatus' }
  | { readonly type: 'pause'; readonly duration: '1h' | 'untilRestart' }
  | { readonly type: 'resume' }
  | { readonly type: 'openFile'; readonly path: string }
  | { readonly type: 'quit' };

export type TrayMenuItem =
  | { readonly kind: 'item'; readonly label: string; readonly action: TrayAction; readonly enabled: boolean }
  | { readonly kind: 'label'; readonly label: string }
  | { readonly kind: 'submenu'; readonly label: string; readonly items: readonly TrayMenuItem[] }
  | { readonly kind: 'separator' };

const RECENT_IN_MENU = 5;

/** The month's Weft storage bill as the tray shows it (README: "status, progress and cost"). */
export function trayCostLabel(cost: CostView | undefined): string | undefined {
  if (!cost?.available) return undefined;
  return `This month: ${usd(cost.mine.soFar.total)} so far, ${usd(cost.mine.projected.total)} projected`;
}

export function trayMenu(s: FolderStatusDto, now: number, cost?: CostView): TrayMenuItem[] {
  const d = displayState(s);
  const costLabel = trayCostLabel(cost);
  const items: TrayMenuItem[] = [
    { kind: 'label', label: trayState(s, now).tooltip },
    ...(costLabel ? [{ kind: 'label', label: costLabel } as const] : []),
    { kind: 'separator' },
    { kind: 'item', label: 'Open Weft folder', action: { type: 'openFolder' }, enabled: true },
    { kind: 'item', label: 'Open status window', action: { type: 'openStatus' }, enabled: true },
  ];
  if (isNotEnrolled(s.error)) {
    items.push({
      kind: 'item',
      label: 'Connect Weft storage…',
      action: { type: 'openStatus' },
      enabled: true,
    });
  } else if (d === 'paused' && !s.massDeletePending) {
    items.push({ kind: 'item', label: 'Resume syncing', action: { type: 'resume' }, enabled: true });
  } else {
    items.push({
      kind: 'submenu',
      label: 'Pause syncing',
      items: [
        { kind: 'item', label: 'For 1 hour', action: { type: 'pause', duration: '1h' }, enabled: true },
        {
          kind: 'item',
          label: 'Until restart',
          action: { type: 'pause', duration: 'untilRestart' },
          enabled: true,
        },
      ],
    });
  }
  const seen = new Set<string>();
  const recent: TrayMenuItem[] = [];
  for (const a of s.recent) {
    if (recent.length >= RECENT_IN_MENU) break;
    if (a.kind !== 'uploaded' && a.kind !== 'downloaded') continue;
    if (seen.has(a.path)) continue;
    seen.add(a.path);
    recent.push({ kind: 'item', label: a.path, action: { type: 'openFile', path: a.path }, enabled: true });
  }
  items.push({
    kind: 'submenu',
    label: 'Recent files',
    items: recent.length > 0 ? recent : [{ kind: 'label', label: 'Nothing yet' }],
  });
  items.push(
    { kind: 'separator' },
    { kind: 'item', label: 'Quit Weft', action: { type: 'quit' }, enabled: true },
  );
  return items;
}

export interface TrayNotification {
  readonly title: string;
  readonly body: string;
}

/** Notifications for the change prev → next (none on the first status). */
export function trayNotifications(
  prev: FolderStatusDto | undefined,
  next: FolderStatusDto,
): TrayNotification[] {
  if (!prev) return [];
  const out: TrayNotification[] = [];
  const before = new Set(prev.conflicts.map((c) => c.path));
  for (const c of next.conflicts) {
    if (!before.has(c.path))
      out.push({ title: 'Conflict', body: `${c.path} was changed in two places; both versions are kept.` });
  }
  if (next.state === 'error' && prev.state !== 'error')
    out.push({ title: 'Weft needs attention', body: next.error ?? 'Syncing stopped.' });
  if (next.storage?.full && !prev.storage?.full)
    out.push({
      title: 'Weft storage is full',
      body: 'New uploads wait until there is room; downloads and deletes go on. Delete files or ask for more space.',
    });
  if (next.massDeletePending && !prev.massDeletePending)
    out.push({
      title: 'Many files deleted',
      body: 'Syncing is paused until you confirm the deletes or restore the files.',
    });
  return out;
}

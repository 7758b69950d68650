/**
 * What the tray shows: the icon for a status, the compact popover's model (state line,
 * transfers with progress, last changes, pause), the menu items built from that same model,
 * and which notifications a status change deserves. Pure functions; Electron main only maps
 * them onto Tray/Menu, and the popover page (renderer/tray.mts) draws the same model.
 */
import type { CostView, FolderStatusDto } from './api.ts';
import {
  DISPLAY_LABEL,
  type DisplayState,
  displayState,
  formatBytes,
  formatEta,
  formatRate,
  isNotEnrolled,
  pausedUntilText,
  plainError,
  usageText,
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

/** The one line saying how the folder is, e.g. "Up to date", "Paused for 30 more min". */
export function stateLine(s: FolderStatusDto, now: number): string {
  const d = displayState(s);
  if (isNotEnrolled(s.error)) return 'not connected to Weft storage yet';
  if (d === 'conflict') return `${s.conflicts.length} conflict${s.conflicts.length === 1 ? '' : 's'}`;
  let line: string = DISPLAY_LABEL[d];
  if (d === 'syncing') line += ` (${s.pendingOperations} waiting)`;
  if (d === 'paused' && !s.massDeletePending) line += ` ${pausedUntilText(s, now)}`;
  return line;
}

export function trayState(s: FolderStatusDto, now: number): TrayState {
  const d = displayState(s);
  let progress: number | undefined;
  if (d === 'syncing') {
    const total = s.transfers.reduce((a, t) => a + t.bytesTotal, 0);
    const done = s.transfers.reduce((a, t) => a + t.bytesDone, 0);
    progress = total > 0 ? Math.min(1, done / total) : 0;
  }
  return { icon: ICON[d], progress, tooltip: `Weft — ${stateLine(s, now)}` };
}

export type TrayAction =
  | { readonly type: 'openFolder' }
  | { readonly type: 'openStatus' }
  | { readonly type: 'pause'; readonly duration: '1h' | 'untilRestart' }
  | { readonly type: 'resume' }
  /** `path` in the main folder, or in the added synced folder at `root` (a local path). */
  | { readonly type: 'openFile'; readonly path: string; readonly root?: string }
  | { readonly type: 'quit' };

/**
 * What the popover page asks the desktop app's shell for (the rest goes through the API):
 * on their own IPC channel, checked in main (main/ipc.ts registerTrayActions).
 */
export const TRAY_ACTION_CHANNEL = 'weft:tray-action';
export const TRAY_SHELL_ACTIONS = ['openFolder', 'openStatus'] as const;
export type TrayShellAction = (typeof TRAY_SHELL_ACTIONS)[number];
export function isTrayShellAction(a: unknown): a is TrayShellAction {
  return typeof a === 'string' && (TRAY_SHELL_ACTIONS as readonly string[]).includes(a);
}

export type TrayMenuItem =
  | { readonly kind: 'item'; readonly label: string; readonly action: TrayAction; readonly enabled: boolean }
  | { readonly kind: 'label'; readonly label: string }
  | { readonly kind: 'submenu'; readonly label: string; readonly items: readonly TrayMenuItem[] }
  | { readonly kind: 'separator' };

/** The month's Weft storage bill as the tray shows it (README: "status, progress and cost"). */
export function trayCostLabel(cost: CostView | undefined): string | undefined {
  if (!cost?.available) return undefined;
  return `This month: ${usd(cost.mine.soFar.total)} so far, ${usd(cost.mine.projected.total)} projected`;
}

/** How many transfers and changes the popover and the menu list. */
export const TRAY_TRANSFERS = 4;
export const TRAY_CHANGES = 5;

type RecentKind = FolderStatusDto['recent'][number]['kind'];
const VERB: Record<RecentKind, string> = {
  added: 'Added',
  uploaded: 'Uploaded',
  downloaded: 'Downloaded',
  deleted: 'Deleted',
  moved: 'Moved',
  conflicted: 'Conflict',
  error: 'Failed',
};

export interface TrayTransferView {
  readonly path: string;
  /** The last part of the path, what the popover shows first. */
  readonly name: string;
  readonly direction: 'up' | 'down';
  /** 0..1 */
  readonly fraction: number;
  /** "Uploading a.txt, 45 %" — the progress bar's accessible name and the menu's label. */
  readonly label: string;
  /** "1.2 MB of 3 MB · 200 KB/s · 9 s left" */
  readonly detail: string;
}

export interface TrayChangeView {
  readonly kind: RecentKind;
  readonly path: string;
  readonly name: string;
  readonly verb: string;
  readonly atMs: number;
  /** The file is there to open (not deleted, not failed). */
  readonly openable: boolean;
  /** Where it is in its folder, and that folder on this computer when it is an added one. */
  readonly file: string;
  readonly root?: string;
}

export type TrayPauseChoice =
  | { readonly kind: 'pause'; readonly choices: readonly { label: string; action: TrayAction }[] }
  | { readonly kind: 'resume'; readonly label: string; readonly action: TrayAction }
  | { readonly kind: 'connect'; readonly label: string; readonly action: TrayAction };

/** The compact popover (and the tray menu, built from it): Dropbox's and Nextcloud's shape. */
export interface TrayPopover {
  readonly icon: TrayIcon;
  readonly display: DisplayState;
  /** "Up to date", "Syncing (3 waiting)", "Paused for 30 more min", … */
  readonly stateLine: string;
  /** Under it: files and storage used, or what went wrong and what to do. */
  readonly detail: string;
  /** The month's Weft storage bill, when the server told. */
  readonly cost: string | undefined;
  readonly transfers: readonly TrayTransferView[];
  /** Transfers under way beyond those listed. */
  readonly moreTransfers: number;
  readonly changes: readonly TrayChangeView[];
  readonly pause: TrayPauseChoice;
}

const baseName = (path: string): string => path.slice(path.lastIndexOf('/') + 1) || path;

export function trayPopover(s: FolderStatusDto, now: number, cost?: CostView): TrayPopover {
  const d = displayState(s);
  const notEnrolled = isNotEnrolled(s.error);
  const line = stateLine(s, now);
  let detail: string;
  if (notEnrolled || d === 'error' || d === 'offline') {
    const e = plainError(s.error);
    detail = `${e.cause} ${e.advice}`;
  } else {
    detail = `${s.files} file${s.files === 1 ? '' : 's'}`;
    if (s.storage) detail += ` · ${usageText(s.storage)}`;
  }
  const transfers = s.transfers.slice(0, TRAY_TRANSFERS).map((t): TrayTransferView => {
    const fraction = t.bytesTotal > 0 ? Math.min(1, t.bytesDone / t.bytesTotal) : 0;
    const name = baseName(t.path);
    return {
      path: t.path,
      name,
      direction: t.direction,
      fraction,
      label: `${t.direction === 'up' ? 'Uploading' : 'Downloading'} ${name}, ${Math.floor(fraction * 100)} %`,
      detail: `${formatBytes(t.bytesDone)} of ${formatBytes(t.bytesTotal)} · ${formatRate(t.rate)} · ${formatEta(t.etaSeconds)}`,
    };
  });
  const seen = new Set<string>();
  const changes: TrayChangeView[] = [];
  for (const a of s.recent) {
    if (changes.length >= TRAY_CHANGES) break;
    // Another synced folder's change is shown with its folder's name and opened in that folder.
    const shown = a.folder ? `${a.folder}: ${a.path}` : a.path;
    const root = a.folder ? s.folders?.find((f) => !f.primary && f.name === a.folder)?.path : undefined;
    if (seen.has(shown)) continue;
    seen.add(shown);
    changes.push({
      kind: a.kind,
      path: shown,
      name: baseName(a.path),
      verb: VERB[a.kind],
      atMs: a.atMs,
      openable: (a.folder === undefined || root !== undefined) && a.kind !== 'deleted' && a.kind !== 'error',
      file: a.path,
      ...(root !== undefined ? { root } : {}),
    });
  }
  const pause: TrayPauseChoice = notEnrolled
    ? { kind: 'connect', label: 'Connect Weft storage…', action: { type: 'openStatus' } }
    : d === 'paused' && !s.massDeletePending
      ? { kind: 'resume', label: 'Resume syncing', action: { type: 'resume' } }
      : {
          kind: 'pause',
          choices: [
            { label: 'For 1 hour', action: { type: 'pause', duration: '1h' } },
            { label: 'Until restart', action: { type: 'pause', duration: 'untilRestart' } },
          ],
        };
  return {
    icon: ICON[d],
    display: d,
    stateLine: line,
    detail,
    cost: trayCostLabel(cost),
    transfers,
    moreTransfers: Math.max(0, s.transfers.length - transfers.length),
    changes,
    pause,
  };
}

/** The tray's menu: the popover's model as menu items (labels for what cannot be clicked). */
export function trayMenu(s: FolderStatusDto, now: number, cost?: CostView): TrayMenuItem[] {
  const p = trayPopover(s, now, cost);
  const items: TrayMenuItem[] = [
    { kind: 'label', label: `Weft — ${p.stateLine}` },
    ...(p.cost ? [{ kind: 'label', label: p.cost } as const] : []),
    ...p.transfers.map((t) => ({ kind: 'label', label: t.label }) as const),
    ...(p.moreTransfers > 0 ? [{ kind: 'label', label: `and ${p.moreTransfers} more` } as const] : []),
    { kind: 'separator' },
    { kind: 'item', label: 'Open Weft folder', action: { type: 'openFolder' }, enabled: true },
    { kind: 'item', label: 'Open status window', action: { type: 'openStatus' }, enabled: true },
  ];
  if (p.pause.kind === 'pause')
    items.push({
      kind: 'submenu',
      label: 'Pause syncing',
      items: p.pause.choices.map((c) => ({ kind: 'item', label: c.label, action: c.action, enabled: true })),
    });
  else items.push({ kind: 'item', label: p.pause.label, action: p.pause.action, enabled: true });
  items.push({
    kind: 'submenu',
    label: 'Recent changes',
    items:
      p.changes.length > 0
        ? p.changes.map((c): TrayMenuItem =>
            c.openable
              ? {
                  kind: 'item',
                  label: `${c.verb} ${c.path}`,
                  action: { type: 'openFile', path: c.file, ...(c.root ? { root: c.root } : {}) },
                  enabled: true,
                }
              : { kind: 'label', label: `${c.verb} ${c.path}` },
          )
        : [{ kind: 'label', label: 'Nothing yet' }],
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

/** Formatting shared by the tray and the status window (plain functions, no platform code). */
import type { FolderStatusDto } from './api.ts';

export function formatBytes(n: number): string {
  if (!Number.isFinite(n) || n < 0) return '—';
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let v = n;
  let i = 0;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${i === 0 ? String(v) : v.toFixed(v >= 100 ? 0 : 1)} ${units[i]}`;
}

export function formatRate(bytesPerSecond: number): string {
  return `${formatBytes(Math.round(bytesPerSecond))}/s`;
}

export function formatEta(seconds: number | undefined): string {
  if (seconds === undefined || !Number.isFinite(seconds)) return 'time left unknown';
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s left`;
  if (s < 3600) return `${Math.round(s / 60)} min left`;
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min left`;
}

/** Weft storage use in words: "2.1 GB of 5 GB used", or "2.1 GB used" without a quota. */
export function usageText(u: { usedBytes: number; limitBytes: number | null }): string {
  const short = (n: number): string => formatBytes(n).replace(/\.0 /, ' ');
  return u.limitBytes === null
    ? `${short(u.usedBytes)} used`
    : `${short(u.usedBytes)} of ${short(u.limitBytes)} used`;
}

/** Weft storage refuses uploads for lack of space (the engine's `full` state). */
export function storageFull(s: FolderStatusDto): boolean {
  return s.state === 'full' || s.storage?.full !== undefined;
}

/** The one headline state the person sees. */
export type DisplayState = 'upToDate' | 'syncing' | 'paused' | 'offline' | 'error' | 'conflict' | 'full';

export function displayState(s: FolderStatusDto): DisplayState {
  if (s.state === 'error' || s.state === 'removed') return 'error';
  if (s.state === 'offline') return 'offline';
  if (s.state === 'paused' || s.massDeletePending) return 'paused';
  if (storageFull(s)) return 'full';
  if (s.conflicts.length > 0) return 'conflict';
  if (s.state === 'syncing' || s.state === 'scanning' || s.pendingOperations > 0 || s.transfers.length > 0)
    return 'syncing';
  return 'upToDate';
}

export const DISPLAY_LABEL: Record<DisplayState, string> = {
  upToDate: 'Up to date',
  syncing: 'Syncing',
  paused: 'Paused',
  offline: 'Offline',
  error: 'Needs attention',
  conflict: 'Conflicts to resolve',
  full: 'Weft storage is full',
};

/** The agent's status before this device is enrolled with a Weft storage server. */
export function isNotEnrolled(message: string | undefined): boolean {
  return /not connected to weft storage/i.test(message ?? '');
}

/** Turn an engine error message into a sentence a person can act on. */
export function plainError(message: string | undefined): { cause: string; advice: string } {
  const m = (message ?? '').toLowerCase();
  if (isNotEnrolled(message))
    return {
      cause: 'This computer is not connected to Weft storage yet.',
      advice: 'Connect it under Accounts with your server’s address and an invite code.',
    };
  if (/removed from your weft account/.test(m))
    return {
      cause: 'This computer was removed from your Weft account.',
      advice: 'It no longer syncs; its files stay here. To sync it again, connect it under Accounts.',
    };
  if (/offline|econnrefused|enotfound|fetch failed|network|socket|timed? ?out/.test(m))
    return {
      cause: 'Weft cannot reach the storage server.',
      advice: 'Check your internet connection; Weft retries on its own.',
    };
  if (/401|403|unauthori[sz]ed|forbidden|token|auth/.test(m))
    return { cause: 'The storage server no longer accepts this device.', advice: 'Reconnect the account.' };
  if (/quota|insufficient|no space|enospc|507/.test(m))
    return { cause: 'There is not enough space.', advice: 'Free some space, then retry.' };
  if (/eacces|eperm|permission/.test(m))
    return { cause: 'Weft is not allowed to read or write a file.', advice: 'Check the file permissions.' };
  if (/mass delete|would delete/.test(m))
    return { cause: 'Many files were deleted at once.', advice: 'Confirm the deletes or restore the files.' };
  return { cause: message ? `Something went wrong: ${message}` : 'Something went wrong.', advice: 'Retry.' };
}

export function pausedUntilText(s: FolderStatusDto, now: number): string {
  if (s.pausedUntilMs === undefined || s.pausedUntilMs >= Number.MAX_SAFE_INTEGER) return 'until you resume';
  const mins = Math.max(1, Math.round((s.pausedUntilMs - now) / 60_000));
  return `for ${mins} more min`;
}

/** How each cloud is named in the UI. */
export const CLOUD_LABEL: Record<'weft' | 'dropbox' | 'gdrive' | 'onedrive', string> = {
  weft: 'Weft storage',
  dropbox: 'Dropbox',
  gdrive: 'Google Drive',
  onedrive: 'OneDrive',
};

/** US dollars: cents for a sum of a cent or more, two significant figures below. */
export function usd(n: number): string {
  if (n === 0) return '$0.00';
  if (n >= 0.01) return `$${n.toFixed(2)}`;
  if (n < 0.000001) return '< $0.000001';
  return `$${Number(n.toPrecision(2)).toFixed(Math.min(8, 1 - Math.floor(Math.log10(n))))}`;
}

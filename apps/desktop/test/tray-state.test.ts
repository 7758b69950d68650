import { describe, expect, it } from 'vitest';
import {
  type TrayMenuItem,
  trayMenu,
  trayNotifications,
  trayPopover,
  trayState,
} from '../src/common/tray-state.ts';
import { displayState, formatEta, plainError, usageText, usd } from '../src/common/format.ts';
import { status } from './fixtures.ts';

const NOW = 1_700_000_000_000;

function labels(items: readonly TrayMenuItem[]): string[] {
  return items.flatMap((i) =>
    i.kind === 'separator'
      ? ['—']
      : i.kind === 'submenu'
        ? [`${i.label} >`, ...labels(i.items).map((l) => `  ${l}`)]
        : [i.label],
  );
}

describe('tray icon', () => {
  it.each([
    [status(), 'up-to-date'],
    [status({ state: 'syncing' }), 'syncing'],
    [status({ pendingOperations: 2 }), 'syncing'],
    [status({ state: 'paused', pausedUntilMs: NOW + 60_000 }), 'paused'],
    [status({ state: 'offline', error: 'fetch failed' }), 'offline'],
    [status({ state: 'error', error: 'boom' }), 'error'],
    [status({ conflicts: [{ path: 'a.txt', copyPath: 'a (conflicted copy).txt', atMs: NOW }] }), 'conflict'],
  ] as const)('%# → %s', (s, icon) => {
    expect(trayState(s, NOW).icon).toBe(icon);
  });

  it('errors and offline win over conflicts; conflicts over syncing', () => {
    const c = [{ path: 'a', copyPath: 'b', atMs: NOW }];
    expect(trayState(status({ state: 'error', conflicts: c }), NOW).icon).toBe('error');
    expect(trayState(status({ state: 'syncing', conflicts: c }), NOW).icon).toBe('conflict');
  });

  it('shows overall progress while syncing', () => {
    const t = (bytesDone: number, bytesTotal: number) => ({
      path: 'x',
      direction: 'up' as const,
      bytesDone,
      bytesTotal,
      rate: 1,
      etaSeconds: 1,
    });
    const s = trayState(status({ state: 'syncing', transfers: [t(25, 100), t(75, 100)] }), NOW);
    expect(s.progress).toBe(0.5);
    expect(trayState(status(), NOW).progress).toBeUndefined();
  });

  it('says how long a pause lasts', () => {
    expect(trayState(status({ state: 'paused', pausedUntilMs: NOW + 30 * 60_000 }), NOW).tooltip).toBe(
      'Weft — Paused for 30 more min',
    );
    expect(trayState(status({ state: 'paused', pausedUntilMs: Number.MAX_SAFE_INTEGER }), NOW).tooltip).toBe(
      'Weft — Paused until you resume',
    );
  });
});

describe('tray menu', () => {
  it('offers pause for 1 h or until restart, the last changes (one per file), quit', () => {
    const s = status({
      recent: [
        { atMs: NOW, kind: 'uploaded', path: 'a.txt' },
        { atMs: NOW, kind: 'deleted', path: 'gone.txt' },
        { atMs: NOW, kind: 'downloaded', path: 'a.txt' },
        { atMs: NOW, kind: 'downloaded', path: 'docs/b.txt' },
      ],
    });
    expect(labels(trayMenu(s, NOW))).toEqual([
      'Weft — Up to date',
      '—',
      'Open Weft folder',
      'Open status window',
      'Pause syncing >',
      '  For 1 hour',
      '  Until restart',
      'Recent changes >',
      '  Uploaded a.txt',
      '  Deleted gone.txt',
      '  Downloaded docs/b.txt',
      '—',
      'Quit Weft',
    ]);
    // A deleted file is named, not offered to open.
    const sub = trayMenu(s, NOW).find((i) => i.kind === 'submenu' && i.label === 'Recent changes');
    expect(sub?.kind === 'submenu' ? sub.items.map((i) => i.kind) : []).toEqual(['item', 'label', 'item']);
  });

  it('offers resume while paused, and at most five recent changes', () => {
    const recent = Array.from({ length: 9 }, (_, i) => ({
      atMs: NOW,
      kind: 'uploaded' as const,
      path: `f${i}`,
    }));
    const items = trayMenu(status({ state: 'paused', recent }), NOW);
    expect(items.some((i) => i.kind === 'item' && i.action.type === 'resume')).toBe(true);
    const sub = items.find((i) => i.kind === 'submenu' && i.label === 'Recent changes');
    expect(sub?.kind === 'submenu' ? sub.items.length : 0).toBe(5);
  });

  it('lists the transfers under way, as the popover does', () => {
    const t = (path: string, bytesDone: number) => ({
      path,
      direction: 'up' as const,
      bytesDone,
      bytesTotal: 1000,
      rate: 100,
      etaSeconds: 5,
    });
    const s = status({
      state: 'syncing',
      pendingOperations: 6,
      transfers: [t('a/one.bin', 450), t('two.bin', 0), t('3', 1000), t('4', 10), t('5', 20), t('6', 30)],
    });
    expect(labels(trayMenu(s, NOW)).slice(0, 7)).toEqual([
      'Weft — Syncing (6 waiting)',
      'Uploading one.bin, 45 %',
      'Uploading two.bin, 0 %',
      'Uploading 3, 100 %',
      'Uploading 4, 1 %',
      'and 2 more',
      '—',
    ]);
  });
});

describe('tray popover model', () => {
  it('gives the state line, files and storage, transfers with progress and the last changes', () => {
    const p = trayPopover(
      status({
        state: 'syncing',
        pendingOperations: 1,
        storage: { usedBytes: 2_100_000_000, limitBytes: 5_000_000_000, checkedAtMs: NOW },
        transfers: [
          {
            path: 'docs/big.iso',
            direction: 'down',
            bytesDone: 1_200_000,
            bytesTotal: 3_000_000,
            rate: 200_000,
          },
        ],
        recent: [
          { atMs: NOW - 1000, kind: 'added', path: 'new/folder' },
          { atMs: NOW - 2000, kind: 'error', path: 'locked.db', detail: 'EBUSY' },
        ],
      }),
      NOW,
    );
    expect(p).toMatchObject({
      icon: 'syncing',
      stateLine: 'Syncing (1 waiting)',
      detail: '3 files · 2.1 GB of 5 GB used',
      cost: undefined,
      moreTransfers: 0,
      pause: { kind: 'pause' },
    });
    expect(p.transfers).toEqual([
      {
        path: 'docs/big.iso',
        name: 'big.iso',
        direction: 'down',
        fraction: 0.4,
        label: 'Downloading big.iso, 40 %',
        detail: '1.2 MB of 3.0 MB · 200 KB/s · time left unknown',
      },
    ]);
    expect(p.changes.map((c) => [c.verb, c.name, c.openable])).toEqual([
      ['Added', 'folder', true],
      ['Failed', 'locked.db', false],
    ]);
  });

  it("names another synced folder's changes by folder and opens them in that folder", () => {
    const line = { state: 'idle' as const, files: 1, pendingOperations: 0 };
    const s = status({
      recent: [
        { atMs: NOW - 1000, kind: 'uploaded', path: 'trip/a.jpg', folder: 'Photos' },
        { atMs: NOW - 1500, kind: 'uploaded', path: 'b.txt', folder: 'Gone' },
        { atMs: NOW - 2000, kind: 'uploaded', path: 'a.jpg' },
      ],
      folders: [
        { ...line, id: 'main', path: '/home/me/Weft', name: '', remoteRoot: '', primary: true },
        {
          ...line,
          id: 'abc',
          path: '/home/me/Pictures',
          name: 'Photos',
          remoteRoot: '.weft/folders/Photos',
          primary: false,
        },
      ],
    });
    const p = trayPopover(s, NOW);
    // A folder not (or no longer) in the list cannot be opened.
    expect(p.changes.map((c) => [c.path, c.name, c.openable, c.root])).toEqual([
      ['Photos: trip/a.jpg', 'a.jpg', true, '/home/me/Pictures'],
      ['Gone: b.txt', 'b.txt', false, undefined],
      ['a.jpg', 'a.jpg', true, undefined],
    ]);
    const recent = trayMenu(s, NOW).find((i) => i.kind === 'submenu' && i.label === 'Recent changes');
    expect(
      recent?.kind === 'submenu'
        ? recent.items.map((i) => (i.kind === 'item' ? i.action : i.kind === 'label' ? i.label : i.kind))
        : [],
    ).toEqual([
      { type: 'openFile', path: 'trip/a.jpg', root: '/home/me/Pictures' },
      'Uploaded Gone: b.txt',
      { type: 'openFile', path: 'a.jpg' },
    ]);
  });

  it('explains a problem instead of counting files, and offers to connect before enrolment', () => {
    expect(trayPopover(status({ state: 'offline', error: 'fetch failed' }), NOW).detail).toMatch(
      /^Weft cannot reach the storage server\. Check your internet connection/,
    );
    const p = trayPopover(
      status({ state: 'offline', error: 'This computer is not connected to Weft storage yet.' }),
      NOW,
    );
    expect(p.pause).toEqual({
      kind: 'connect',
      label: 'Connect Weft storage…',
      action: { type: 'openStatus' },
    });
    expect(trayPopover(status({ state: 'paused', pausedUntilMs: NOW + 3_600_000 }), NOW)).toMatchObject({
      stateLine: 'Paused for 60 more min',
      pause: { kind: 'resume', label: 'Resume syncing', action: { type: 'resume' } },
    });
  });

  it('a transfer of unknown size shows 0 %, never more than 100 %', () => {
    const t = { path: 'x', direction: 'up' as const, rate: 0 };
    const p = trayPopover(
      status({
        transfers: [
          { ...t, bytesDone: 5, bytesTotal: 0 },
          { ...t, bytesDone: 20, bytesTotal: 10 },
        ],
      }),
      NOW,
    );
    expect(p.transfers.map((x) => x.fraction)).toEqual([0, 1]);
  });
});

describe('tray notifications', () => {
  it('announces new conflicts, errors and mass deletes once', () => {
    const c = { path: 'a.txt', copyPath: 'a (conflicted copy).txt', atMs: NOW };
    expect(trayNotifications(undefined, status({ conflicts: [c] }))).toEqual([]);
    expect(trayNotifications(status(), status({ conflicts: [c] }))).toHaveLength(1);
    expect(trayNotifications(status({ conflicts: [c] }), status({ conflicts: [c] }))).toEqual([]);
    expect(trayNotifications(status(), status({ state: 'error', error: 'x' }))[0]?.title).toBe(
      'Weft needs attention',
    );
    expect(trayNotifications(status({ state: 'error' }), status({ state: 'error' }))).toEqual([]);
    expect(trayNotifications(status(), status({ state: 'paused', massDeletePending: true }))[0]?.title).toBe(
      'Many files deleted',
    );
  });
});

describe('plain language', () => {
  it('explains errors and time left', () => {
    expect(plainError('fetch failed').cause).toMatch(/cannot reach/);
    expect(plainError('HTTP 401 unauthorized').advice).toBe('Reconnect the account.');
    expect(plainError('ENOSPC: no space left').cause).toMatch(/space/);
    expect(formatEta(undefined)).toBe('time left unknown');
    expect(formatEta(95)).toBe('2 min left');
  });
});

describe('before enrolment', () => {
  it('says so, offers to connect instead of pause, and explains it in plain words', () => {
    const s = status({
      state: 'offline',
      error: 'This computer is not connected to Weft storage yet. Connect it under Accounts.',
    });
    expect(trayState(s, NOW)).toMatchObject({
      icon: 'offline',
      tooltip: 'Weft — not connected to Weft storage yet',
    });
    const menu = trayMenu(s, NOW);
    expect(menu).toContainEqual({
      kind: 'item',
      label: 'Connect Weft storage…',
      action: { type: 'openStatus' },
      enabled: true,
    });
    expect(menu.some((i) => i.kind === 'submenu' && i.label === 'Pause syncing')).toBe(false);
    expect(plainError(s.error).cause).toBe('This computer is not connected to Weft storage yet.');
  });
});

describe('Weft storage full', () => {
  const full = {
    usedBytes: 4_990_000_000,
    limitBytes: 5_000_000_000,
    checkedAtMs: NOW,
    full: { sinceMs: NOW, neededBytes: 20_000_000, nextCheckMs: NOW + 30_000 },
  };

  it('is its own headline, shown while a pass runs too, with the error icon', () => {
    expect(displayState(status({ state: 'full', storage: full, pendingOperations: 3 }))).toBe('full');
    // Downloads go on while full: a pass says syncing, the person still sees "full".
    expect(displayState(status({ state: 'syncing', storage: full }))).toBe('full');
    expect(trayState(status({ state: 'full', storage: full }), NOW)).toMatchObject({
      icon: 'error',
      tooltip: 'Weft — Weft storage is full',
    });
    // Offline says offline; room again says what the folder does.
    expect(displayState(status({ state: 'offline', storage: full }))).toBe('offline');
    expect(displayState(status({ storage: { ...full, full: undefined } }))).toBe('upToDate');
  });

  it('announces it once, when the storage fills', () => {
    const before = status({ storage: { ...full, full: undefined } });
    const after = status({ state: 'full', storage: full });
    expect(trayNotifications(before, after).map((n) => n.title)).toEqual(['Weft storage is full']);
    expect(trayNotifications(after, status({ state: 'syncing', storage: full }))).toEqual([]);
  });

  it('says what is used, against the quota or alone', () => {
    expect(usageText({ usedBytes: 2_100_000_000, limitBytes: 5_000_000_000 })).toBe('2.1 GB of 5 GB used');
    expect(usageText({ usedBytes: 2_100_000_000, limitBytes: null })).toBe('2.1 GB used');
    expect(usageText({ usedBytes: 0, limitBytes: 1_000_000 })).toBe('0 B of 1 MB used');
  });
});

describe('tray cost', () => {
  const parts = (total: number) => ({ storage: total, requests: 0, transfer: 0, egress: 0, plan: 0, total });
  const cost = {
    available: true as const,
    month: '2026-11',
    elapsed: 0.5,
    tables: { fs: 'efs-standard', objects: 's3-standard' },
    mine: { soFar: parts(0.0123), projected: parts(1.5) },
    proxy: { soFar: parts(2), projected: parts(4) },
    requests: { put: 1, get: 2, delete: 0 },
    egressBytes: 0,
    history: [],
  };

  it('showsTheMonthsBillUnderTheStatusWhenTheServerAnswers', () => {
    expect(labels(trayMenu(status(), NOW, cost)).slice(0, 3)).toEqual([
      'Weft — Up to date',
      'This month: $0.01 so far, $1.50 projected',
      '—',
    ]);
    const without = labels(trayMenu(status(), NOW, { available: false, reason: 'offline' }));
    expect(without.some((l) => l.startsWith('This month'))).toBe(false);
    expect(labels(trayMenu(status(), NOW))).toEqual(without);
  });

  it('writesSmallSumsWithTwoSignificantFigures', () => {
    expect(usd(0)).toBe('$0.00');
    expect(usd(0.0000123)).toBe('$0.000012');
    expect(usd(0.00099)).toBe('$0.00099');
    expect(usd(0.0000001)).toBe('< $0.000001');
    expect(usd(12.345)).toBe('$12.35');
  });
});

/**
 * The UI service before this device is enrolled (the desktop app's first run), and how share
 * API answers become what the Sharing screen shows. The enrolled paths run for real in
 * e2e/test/desktop-ui.test.ts (agent + proxy + emulators).
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { ShareSchema, dispatch } from '@weft/ui-contract';
import type { ShareInfo } from '@weft/wire/shares';
import { afterEach, describe, expect, it } from 'vitest';
import { memorySecretStore } from '../src/secret-store.ts';
import { availabilityText, createUiService, toShare, type UiService } from '../src/ui-server/service.ts';

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function unenrolled(enrol?: () => Promise<never>): Promise<UiService> {
  const stateDir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-ui-service-'));
  const ui = await createUiService({
    folder: '/home/bob/Weft',
    stateDir,
    session: () => undefined,
    secrets: memorySecretStore(),
    ...(enrol ? { enrol } : {}),
  });
  cleanup.push(
    () => fsp.rm(stateDir, { recursive: true, force: true }),
    () => ui.dispose(),
  );
  return ui;
}

describe('UI service before enrolment', () => {
  it('shows a plain "not connected" status, no Weft account, and sharing unavailable', async () => {
    const ui = await unenrolled();
    expect(await dispatch(ui.handlers, 'getStatus', {})).toMatchObject({
      ok: true,
      value: {
        state: 'offline',
        folder: '/home/bob/Weft',
        error: expect.stringMatching(/not connected to Weft storage/),
      },
    });
    expect(await dispatch(ui.handlers, 'listAccounts', {})).toEqual({ ok: true, value: { accounts: [] } });
    expect(await dispatch(ui.handlers, 'getSharing', {})).toMatchObject({
      ok: true,
      value: { available: false, shares: [] },
    });
    for (const [m, input] of [
      ['pause', { duration: '1h' }],
      ['syncNow', {}],
      ['getStorage', {}],
      ['shareFolder', { name: 'T', cloud: 'weft', folder: 'T' }],
    ] as const) {
      expect(await dispatch(ui.handlers, m, input), m).toMatchObject({
        ok: false,
        error: { code: 'unavailable' },
      });
    }
  });

  it('reports a failed enrolment as an error the form can show', async () => {
    const ui = await unenrolled(async () => {
      throw new Error('HTTP 401 bad admin token');
    });
    expect(
      await dispatch(ui.handlers, 'connectWeft', {
        server: 'http://127.0.0.1:9',
        enrolment: { kind: 'adminToken', adminToken: 'nope' },
      }),
    ).toEqual({
      ok: false,
      error: { code: 'failed', message: 'Could not connect to http://127.0.0.1:9: HTTP 401 bad admin token' },
    });
  });
});

describe('shares as the Sharing screen shows them', () => {
  it('names your cloud and folder, marks you, and puts the mirror state in words', () => {
    const info: ShareInfo = {
      id: '6c1b0b5e-6a8f-4d3c-9f7a-0a1b2c3d4e5f',
      name: 'Team plans',
      owner: 'alice',
      createdMs: 1,
      role: 'member',
      members: [
        { member: 'alice', role: 'owner', cloud: 'dropbox', joinedMs: 1 },
        {
          member: 'bob',
          role: 'member',
          cloud: 'gdrive',
          root: 'From Alice',
          accountLabel: 'Google Drive',
          joinedMs: 2,
        },
      ],
      status: { state: 'error', pending: 3, applied: 10, conflicts: 0, lastError: 'Dropbox said 503' },
    };
    expect(toShare(info, 'bob')).toEqual({
      id: info.id,
      name: 'Team plans',
      role: 'member',
      cloud: 'gdrive',
      folder: 'From Alice',
      members: [
        { name: 'alice', cloud: 'dropbox', role: 'owner', you: false },
        { name: 'bob', cloud: 'gdrive', role: 'member', you: true },
      ],
      state: 'Problem (retrying)',
      error: 'Dropbox said 503',
    });
  });

  it('shows a member whose cloud refuses writes as unavailable, why, since when and what waits', () => {
    const since = new Date(2026, 10, 21, 14, 2).getTime(); // local time
    const later = new Date(2026, 10, 21, 18, 30).getTime();
    const info: ShareInfo = {
      id: '6c1b0b5e-6a8f-4d3c-9f7a-0a1b2c3d4e5f',
      name: 'Team plans',
      owner: 'alice',
      createdMs: 1,
      role: 'owner',
      members: [
        {
          member: 'alice',
          role: 'owner',
          cloud: 'dropbox',
          joinedMs: 1,
          replica: { state: 'available', waiting: 0 },
        },
        {
          member: 'bob',
          role: 'member',
          cloud: 'gdrive',
          joinedMs: 2,
          replica: { state: 'unavailable', cause: 'full', sinceMs: since, nextTryMs: later, waiting: 37 },
        },
        { member: 'carol', role: 'member', cloud: 'onedrive', joinedMs: 3 },
      ],
      status: { state: 'syncing', pending: 37, applied: 10, conflicts: 0 },
    };
    const members = toShare(info, 'alice', later).members;
    expect(members.map((m) => m.availability?.summary)).toEqual([
      'available',
      'unavailable since 14:02 — account full; 37 changes waiting',
      undefined, // the server did not say
    ]);
    expect(members[1]?.availability).toEqual({
      state: 'unavailable',
      cause: 'full',
      sinceMs: since,
      waiting: 37,
      summary: 'unavailable since 14:02 — account full; 37 changes waiting',
    });
    // Another day: the date too. The member sees the cloud's own message.
    const nextDay = new Date(2026, 10, 22, 9, 0).getTime();
    expect(
      availabilityText(
        { state: 'unavailable', cause: 'unauthorised', sinceMs: since, waiting: 1, error: '401' },
        nextDay,
      ),
    ).toBe(
      'unavailable since 2026-11-21 14:02 — access revoked or expired — connect the account again; 1 change waiting',
    );
    const own = toShare(
      {
        ...info,
        members: [
          {
            member: 'bob',
            role: 'member',
            cloud: 'gdrive',
            joinedMs: 2,
            replica: { state: 'unavailable', cause: 'failing', waiting: 2, error: 'Drive said 503' },
          },
        ],
      },
      'bob',
      later,
    );
    expect(own.members[0]?.availability).toMatchObject({
      summary: 'unavailable — the service is failing; 2 changes waiting',
      detail: 'Drive said 503',
    });
    // What the agent hands the UI passes the UI contract.
    expect(ShareSchema.parse(toShare(info, 'alice', later))).toEqual(toShare(info, 'alice', later));
  });
});

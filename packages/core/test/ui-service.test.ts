/**
 * The UI service before this device is enrolled (the desktop app's first run), and how share
 * API answers become what the Sharing screen shows. The enrolled paths run for real in
 * e2e/test/desktop-ui.test.ts (agent + proxy + emulators).
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { dispatch } from '@weft/ui-contract';
import type { ShareInfo } from '@weft/wire/shares';
import { afterEach, describe, expect, it } from 'vitest';
import { memorySecretStore } from '../src/secret-store.ts';
import { createUiService, toShare, type UiService } from '../src/ui-server/service.ts';

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
});

/**
 * Selective sync through the agent's UI API (ui-server/selective-view.ts): the server's
 * folders listed with which this device keeps, a choice applied at once, bad input refused
 * with nothing changed, and "unavailable" before enrolment. The engine is a real one on the
 * in-memory harness (support/fake-cloud.ts).
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { dispatch } from '@weft/ui-contract';
import { afterEach, describe, expect, it } from 'vitest';
import { memorySecretStore } from '../src/secret-store.ts';
import { type UiSession, createUiService } from '../src/ui-server/service.ts';
import { FakeCloud, type FakeDevice } from './support/fake-cloud.ts';

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function serviceFor(device: FakeDevice | undefined) {
  const stateDir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-selective-ui-'));
  // The selective-sync handlers use the session's engine only; the rest of a session
  // (the HTTP client, the token) is not reached by these calls.
  const session = device
    ? ({
        engine: device.engine,
        server: '',
        user: 'alice',
        deviceName: device.name,
        token: '',
      } as unknown as UiSession)
    : undefined;
  const ui = await createUiService({
    folder: device?.folder ?? '/nowhere',
    stateDir,
    session: () => session,
    secrets: memorySecretStore(),
  });
  cleanup.push(
    () => fsp.rm(stateDir, { recursive: true, force: true }),
    () => ui.dispose(),
  );
  return ui;
}

describe('selective sync in the UI API', () => {
  it('lists the folders, applies a choice at once, and refuses bad paths', async () => {
    const cloud = new FakeCloud();
    cleanup.push(() => cloud.close());
    const a = await cloud.addDevice('a');
    const b = await cloud.addDevice('b');
    await a.write('Photos/2019/beach.jpg', 'sand');
    await a.write('Docs/cv.txt', 'me');
    await cloud.settle();
    const ui = await serviceFor(b);

    expect(await dispatch(ui.handlers, 'getSelectiveSync', {})).toEqual({
      ok: true,
      value: {
        available: true,
        parent: '',
        offline: false,
        excluded: [],
        folders: [
          { path: 'Docs', name: 'Docs', selected: true },
          { path: 'Photos', name: 'Photos', selected: true },
        ],
      },
    });
    const set = await dispatch(ui.handlers, 'setSelectiveSync', { excluded: ['Photos'] });
    expect(set).toMatchObject({
      ok: true,
      value: { excluded: [{ path: 'Photos', state: 'leaving' }] },
    });
    await b.engine.waitIdle();
    await b.sync();
    expect(await b.exists('Photos')).toBe(false);
    expect(cloud.serverTree().has('Photos/2019/beach.jpg')).toBe(true);
    expect(await dispatch(ui.handlers, 'getSelectiveSync', { parent: 'Photos' })).toMatchObject({
      ok: true,
      value: {
        parent: 'Photos',
        folders: [{ path: 'Photos/2019', name: '2019', selected: false }],
        excluded: [{ path: 'Photos', state: 'excluded' }],
      },
    });

    // Offline: the folders this device knows, and the ones it leaves out.
    b.offline = true;
    expect(await dispatch(ui.handlers, 'getSelectiveSync', {})).toMatchObject({
      ok: true,
      value: {
        offline: true,
        folders: [
          { path: 'Docs', selected: true },
          { path: 'Photos', selected: false, state: 'excluded' },
        ],
      },
    });
    b.offline = false;

    const bad = await dispatch(ui.handlers, 'setSelectiveSync', { excluded: ['Docs', '../up'] });
    expect(bad).toMatchObject({
      ok: false,
      error: { code: 'bad-request', message: expect.stringMatching(/\.\.\/up/) },
    });
    expect(b.engine.selective.current.entries()).toEqual([['Photos', 'excluded']]);
    expect(await dispatch(ui.handlers, 'setSelectiveSync', { excluded: 'Photos' })).toMatchObject({
      ok: false,
      error: { code: 'bad-request' },
    });
  });

  it('is unavailable before this computer is enrolled', async () => {
    const ui = await serviceFor(undefined);
    expect(await dispatch(ui.handlers, 'getSelectiveSync', {})).toMatchObject({
      ok: true,
      value: { available: false, folders: [] },
    });
    expect(await dispatch(ui.handlers, 'setSelectiveSync', { excluded: [] })).toMatchObject({
      ok: false,
      error: { code: 'unavailable' },
    });
  });
});

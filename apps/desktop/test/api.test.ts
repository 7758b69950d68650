import { describe, expect, it } from 'vitest';
import {
  ApiError,
  type ApiHandlers,
  DEFAULT_SETTINGS,
  api,
  channelOf,
  createClient,
  dispatch,
  methodOfChannel,
} from '../src/common/api.ts';
import { type IpcMainLike, registerIpc } from '../src/main/ipc.ts';
import { status } from './fixtures.ts';

function handlers(over: Partial<ApiHandlers> = {}): ApiHandlers {
  const fail = async (): Promise<never> => {
    throw new ApiError('unavailable', 'not here');
  };
  const base: ApiHandlers = {
    getStatus: async () => status(),
    pause: async () => status({ state: 'paused' }),
    resume: async () => status(),
    syncNow: async () => status(),
    resolveConflict: async () => status(),
    resolveMassDelete: async () => status(),
    getCost: async () => ({ available: false as const, reason: 'offline' }),
    getStorage: async () => ({
      filesystemTierBytes: 1,
      filesystemTierFiles: 1,
      objectTierBytes: 0,
      objectTierFiles: 0,
    }),
    getSettings: async () => DEFAULT_SETTINGS,
    setSettings: async (p) => ({ ...DEFAULT_SETTINGS, ...p }),
    getSelectiveSync: async () => ({
      available: false,
      parent: '',
      folders: [],
      excluded: [],
      offline: false,
    }),
    setSelectiveSync: fail,
    listAccounts: async () => ({ accounts: [] }),
    connectCloud: async () => ({ authorizeUrl: 'http://127.0.0.1:1/oauth2/authorize' }),
    disconnect: async () => ({ accounts: [] }),
    connectWeft: fail,
    listDevices: async () => ({ available: false, reason: 'later', devices: [] }),
    removeDevice: fail,
    getSharing: async () => ({ available: false, reason: 'later', shares: [] }),
    shareFolder: fail,
    createInvite: fail,
    previewInvite: fail,
    acceptInvite: fail,
    leaveShare: fail,
    openFolder: async () => ({ opened: false }),
    fileHistory: async () => ({ available: false as const, reason: 'later' }),
    deletedFiles: async () => ({ available: false as const, reason: 'later' }),
    getStorageHealth: async () => ({ available: false as const, reason: 'later' }),
    restoreVersion: fail,
    downloadVersion: fail,
    listFolders: async () => ({ folders: [] }),
    addFolder: fail,
    removeFolder: fail,
  };
  return { ...base, ...over };
}

describe('channels', () => {
  it('are prefixed, and only known methods map back', () => {
    expect(channelOf('pause')).toBe('weft:pause');
    expect(methodOfChannel('weft:pause')).toBe('pause');
    expect(methodOfChannel('pause')).toBeUndefined();
    expect(methodOfChannel('weft:toString')).toBeUndefined();
    expect(methodOfChannel('weft:__proto__')).toBeUndefined();
  });
});

describe('dispatch validates both sides', () => {
  it('rejects unknown methods and bad input without calling the handler', async () => {
    let called = 0;
    const h = handlers({
      pause: async () => {
        called++;
        return status({ state: 'paused' });
      },
    });
    expect(await dispatch(h, 'rm -rf', {})).toMatchObject({ ok: false, error: { code: 'unknown-method' } });
    expect(await dispatch(h, 'pause', { duration: 'forever' })).toMatchObject({
      ok: false,
      error: { code: 'bad-request' },
    });
    expect(await dispatch(h, 'pause', { duration: '1h', extra: 1 })).toMatchObject({
      ok: false,
      error: { code: 'bad-request' },
    });
    expect(await dispatch(h, 'setSettings', { massDeleteCount: 3 })).toMatchObject({ ok: false });
    expect(await dispatch(h, 'setSettings', { ignorePatterns: [''] })).toMatchObject({ ok: false });
    expect(called).toBe(0);
    expect(await dispatch(h, 'pause', { duration: '1h' })).toMatchObject({
      ok: true,
      value: { state: 'paused' },
    });
    expect(called).toBe(1);
  });

  it('checks what handlers return and turns throws into typed errors', async () => {
    const bad = handlers({ getStatus: async () => ({ state: 'weird' }) as never });
    expect(await dispatch(bad, 'getStatus', {})).toMatchObject({ ok: false, error: { code: 'failed' } });
    expect(await dispatch(handlers(), 'shareFolder', { name: 'X', cloud: 'dropbox', folder: 'x' })).toEqual({
      ok: false,
      error: { code: 'unavailable', message: 'not here' },
    });
  });
});

describe('typed client', () => {
  it('validates input before sending and answers after receiving', async () => {
    const sent: string[] = [];
    const h = handlers();
    const client = createClient(
      async (m, input) => {
        sent.push(m);
        return dispatch(h, m, input);
      },
      () => () => undefined,
    );
    expect(Object.isFrozen(client)).toBe(true);
    await expect(client.pause({ duration: 'soon' as '1h' })).rejects.toMatchObject({ code: 'bad-request' });
    expect(sent).toEqual([]);
    expect((await client.getSettings({})).massDeletePercent).toBe(50);
    await expect(client.acceptInvite({ invite: 'i', cloud: 'dropbox', folder: 'f' })).rejects.toBeInstanceOf(
      ApiError,
    );
    const liar = createClient(
      async () => ({ ok: true, value: { nope: 1 } }),
      () => () => undefined,
    );
    await expect(liar.getStatus({})).rejects.toMatchObject({ code: 'failed' });
  });

  it('drops malformed status pushes', () => {
    let push: (raw: unknown) => void = () => undefined;
    const client = createClient(
      async () => ({}),
      (l) => ((push = l), () => undefined),
    );
    const got: string[] = [];
    client.onStatus((s) => got.push(s.state));
    push({ bogus: true });
    push(status({ state: 'syncing' }));
    expect(got).toEqual(['syncing']);
  });
});

describe('IPC registration in main', () => {
  it('registers one prefixed channel per method, checks the sender, and removes them all', async () => {
    const registered = new Map<
      string,
      (e: { senderFrame: { url: string } | null }, i: unknown) => Promise<unknown>
    >();
    const ipc: IpcMainLike = {
      handle: (c, l) => void registered.set(c, l),
      removeHandler: (c) => void registered.delete(c),
    };
    const off = registerIpc(ipc, handlers(), (url) => url.startsWith('file:///app/renderer/'));
    expect([...registered.keys()].sort()).toEqual(
      Object.keys(api)
        .map((m) => `weft:${m}`)
        .sort(),
    );
    const pause = registered.get('weft:pause');
    expect(
      await pause?.({ senderFrame: { url: 'https://evil.example/' } }, { duration: '1h' }),
    ).toMatchObject({ ok: false });
    expect(
      await pause?.({ senderFrame: { url: 'file:///app/renderer/index.html' } }, { duration: '1h' }),
    ).toMatchObject({
      ok: true,
    });
    off();
    expect(registered.size).toBe(0);
  });
});

import { describe, expect, it } from 'vitest';
import { api } from '../src/common/api.ts';
import { type IpcMainLike, isRendererPage, registerIpc, registerTrayActions } from '../src/main/ipc.ts';
import { createBridge, type IpcRendererLike } from '../src/preload/bridge.ts';

function fakeIpc() {
  const invoked: { channel: string; args: unknown[] }[] = [];
  const listeners = new Map<string, Set<(e: unknown, ...a: unknown[]) => void>>();
  const ipc: IpcRendererLike = {
    invoke: async (channel, ...args) => {
      invoked.push({ channel, args });
      return { ok: true, value: null };
    },
    on: (c, l) => listeners.set(c, (listeners.get(c) ?? new Set()).add(l)),
    removeListener: (c, l) => listeners.get(c)?.delete(l),
  };
  return { ipc, invoked, listeners };
}

describe('preload bridge (window.weft)', () => {
  it('is frozen and sends known methods on their prefixed channel only', async () => {
    const { ipc, invoked } = fakeIpc();
    const bridge = createBridge(ipc);
    expect(Object.isFrozen(bridge)).toBe(true);
    for (const m of Object.keys(api) as (keyof typeof api)[]) await bridge.call(m, {});
    expect(invoked.map((i) => i.channel)).toEqual(Object.keys(api).map((m) => `weft:${m}`));
    for (const bad of ['toString', '__proto__', 'weft:pause', 'constructor', '']) {
      await expect(bridge.call(bad as 'pause', {})).rejects.toThrow(/unknown method/);
    }
    await expect(bridge.call(42 as unknown as 'pause', {})).rejects.toThrow(/unknown method/);
    expect(invoked).toHaveLength(Object.keys(api).length);
  });

  it('listens to the status event only, and unsubscribes', () => {
    const { ipc, listeners } = fakeIpc();
    const bridge = createBridge(ipc);
    const got: unknown[] = [];
    const off = bridge.onStatus((raw) => got.push(raw));
    expect([...listeners.keys()]).toEqual(['weft:event:status']);
    for (const l of listeners.get('weft:event:status') ?? []) l({ sender: 'x' }, { state: 'idle' });
    expect(got).toEqual([{ state: 'idle' }]);
    off();
    expect(listeners.get('weft:event:status')?.size).toBe(0);
  });
});

describe('tray popover actions', () => {
  it('sends only openFolder and openStatus, on their own channel', async () => {
    const { ipc, invoked } = fakeIpc();
    const bridge = createBridge(ipc);
    await bridge.trayAction('openFolder');
    await bridge.trayAction('openStatus');
    for (const bad of ['quit', 'openFile', '', 'constructor'])
      await expect(bridge.trayAction(bad as 'openFolder')).rejects.toThrow(/unknown tray action/);
    await expect(bridge.trayAction({ type: 'openFolder' } as unknown as 'openFolder')).rejects.toThrow(
      /unknown tray action/,
    );
    expect(invoked).toEqual([
      { channel: 'weft:tray-action', args: ['openFolder'] },
      { channel: 'weft:tray-action', args: ['openStatus'] },
    ]);
  });

  it('main runs them for the renderer pages only, and only the known ones', async () => {
    const registered = new Map<
      string,
      (e: { senderFrame: { url: string } | null }, i: unknown) => Promise<unknown>
    >();
    const ipc: IpcMainLike = {
      handle: (c, l) => void registered.set(c, l),
      removeHandler: (c) => void registered.delete(c),
    };
    const page = isRendererPage('file:///opt/Weft/resources/renderer/tray.html');
    const ran: string[] = [];
    const off = registerTrayActions(ipc, page, (a) => ran.push(a));
    const handle = registered.get('weft:tray-action');
    const tray = { senderFrame: { url: 'file:///opt/Weft/resources/renderer/tray.html' } };
    expect(await handle?.(tray, 'openFolder')).toEqual({ ok: true, value: null });
    expect(await handle?.(tray, 'quit')).toMatchObject({
      ok: false,
      error: { message: 'unknown tray action' },
    });
    expect(
      await handle?.({ senderFrame: { url: 'http://127.0.0.1:4000/tray.html' } }, 'openStatus'),
    ).toMatchObject({ ok: false, error: { message: 'untrusted sender' } });
    expect(await handle?.({ senderFrame: null }, 'openStatus')).toMatchObject({ ok: false });
    expect(ran).toEqual(['openFolder']);
    off();
    expect(registered.size).toBe(0);
  });
});

describe('the desktop window needs no secret', () => {
  it('the bridge carries method calls and status only: no secret, no other channel', async () => {
    const { ipc, invoked } = fakeIpc();
    const bridge = createBridge(ipc);
    expect(Object.keys(bridge).sort()).toEqual(['call', 'onStatus', 'pickFolder', 'trayAction']);
    await bridge.call('getStatus', {});
    // What crosses IPC is the channel and the input: nothing the page could use elsewhere.
    expect(invoked).toEqual([{ channel: 'weft:getStatus', args: [{}] }]);
  });

  it('main answers the packaged renderer page only, not the same UI over HTTP or other files', async () => {
    const trusted = isRendererPage('file:///opt/Weft/resources/renderer/index.html');
    for (const url of [
      'file:///opt/Weft/resources/renderer/index.html',
      'file:///opt/Weft/resources/renderer/index.html#sharing',
    ])
      expect(trusted(url), url).toBe(true);
    for (const url of [
      'http://127.0.0.1:41234/',
      'http://127.0.0.1:41234/index.html',
      'file:///tmp/renderer/index.html',
      'file:///opt/Weft/resources/renderer/other.html',
      'file:///opt/Weft/resources/renderer/index.html?x=1',
      'file://evil.example/opt/Weft/resources/renderer/index.html',
      'https://evil.example/renderer/index.html',
      'not a url',
      '',
    ])
      expect(trusted(url), url).toBe(false);
    expect(() => isRendererPage('http://127.0.0.1:1/index.html')).toThrow(/file: URL/);

    const registered = new Map<
      string,
      (e: { senderFrame: { url: string } | null }, i: unknown) => Promise<unknown>
    >();
    const ipc: IpcMainLike = {
      handle: (c, l) => void registered.set(c, l),
      removeHandler: (c) => void registered.delete(c),
    };
    let calls = 0;
    const handlers = new Proxy(
      {},
      {
        get: () => async () => {
          calls++;
          return { accounts: [] };
        },
      },
    ) as Parameters<typeof registerIpc>[1];
    const off = registerIpc(ipc, handlers, trusted);
    const listAccounts = registered.get('weft:listAccounts');
    for (const url of ['http://127.0.0.1:41234/', 'file:///tmp/renderer/index.html'])
      expect(await listAccounts?.({ senderFrame: { url } }, {}), url).toMatchObject({
        ok: false,
        error: { message: 'untrusted sender' },
      });
    expect(await listAccounts?.({ senderFrame: null }, {})).toMatchObject({ ok: false });
    expect(calls).toBe(0);
    expect(
      await listAccounts?.(
        { senderFrame: { url: 'file:///opt/Weft/resources/renderer/index.html#accounts' } },
        {},
      ),
    ).toEqual({ ok: true, value: { accounts: [] } });
    expect(calls).toBe(1);
    off();
  });
});

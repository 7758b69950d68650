import { describe, expect, it } from 'vitest';
import { api } from '../src/common/api.ts';
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

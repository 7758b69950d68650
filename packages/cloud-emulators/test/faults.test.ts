/** Fault injection: decisions come from per-rule counters, so every run sees the same faults. */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DropboxEmulator } from '../src/dropbox.ts';
import { FaultInjector } from '../src/faults.ts';

describe('FaultInjector', () => {
  it('spreads a rate evenly and deterministically', () => {
    const f = new FaultInjector();
    f.add({ rate: 0.1, action: { kind: 'status', status: 429 } });
    const hits = Array.from({ length: 100 }, (_, i) => (f.decide('x', 'POST').status ? i : -1)).filter(
      (i) => i >= 0,
    );
    expect(hits).toEqual([9, 19, 29, 39, 49, 59, 69, 79, 89, 99]);
  });

  it('matches by endpoint and method, honours nth and times', () => {
    const f = new FaultInjector();
    f.add({
      endpoint: 'files/upload',
      method: 'POST',
      nth: [0, 2],
      action: { kind: 'reset', when: 'before' },
    });
    f.add({
      endpoint: 'files/download',
      times: 1,
      action: { kind: 'status', status: 503, retryAfterSeconds: 1 },
    });
    expect(f.decide('files/upload', 'POST').reset?.when).toBe('before');
    expect(f.decide('files/upload', 'POST').reset).toBeUndefined();
    expect(f.decide('files/other', 'POST').reset).toBeUndefined();
    expect(f.decide('files/upload', 'POST').reset).toBeDefined();
    expect(f.decide('files/download', 'POST').status?.status).toBe(503);
    expect(f.decide('files/download', 'POST').status).toBeUndefined();
    expect(f.stats().fired).toEqual({ 'files/upload:reset-before': 2, 'files/download:503': 1 });
  });

  it('keeps each rule at its rate when two fire on the same request', () => {
    const f = new FaultInjector();
    f.add({ rate: 0.5, action: { kind: 'status', status: 429 } });
    f.add({ rate: 0.25, action: { kind: 'reset', when: 'after' } });
    let statuses = 0;
    let resets = 0;
    for (let i = 0; i < 400; i++) {
      const d = f.decide('e', 'GET');
      if (d.status) statuses++;
      if (d.reset) resets++;
    }
    expect(statuses + resets).toBeLessThanOrEqual(400);
    expect(statuses).toBe(200);
    expect(resets).toBe(99); // the last deferred one is still pending
  });

  it('adds latency and caps bandwidth', () => {
    const f = new FaultInjector();
    f.add({ action: { kind: 'latency', ms: 5 } });
    f.add({ action: { kind: 'latency', ms: 7 } });
    f.add({ action: { kind: 'bandwidth', bytesPerSecond: 1000 } });
    f.add({ action: { kind: 'bandwidth', bytesPerSecond: 500 } });
    const d = f.decide('e', 'GET');
    expect(d.latencyMs).toBe(12);
    expect(d.bytesPerSecond).toBe(500);
  });

  it('refuses malformed rules', () => {
    const f = new FaultInjector();
    expect(() => f.add({ rate: 2, action: { kind: 'status', status: 429 } })).toThrow();
    expect(() => f.add({ action: { kind: 'status', status: 200 } })).toThrow();
  });
});

describe('faults on the wire', () => {
  let emu: DropboxEmulator;
  const data = randomBytes(300_000);
  beforeAll(async () => {
    emu = await new DropboxEmulator().start();
    await fetch(`${emu.url}/2/files/upload`, {
      method: 'POST',
      headers: { authorization: `Bearer ${emu.accessToken}`, 'dropbox-api-arg': '{"path":"/f.bin"}' },
      body: data,
    });
  });
  afterAll(() => emu.close());

  const download = () =>
    fetch(`${emu.url}/2/files/download`, {
      method: 'POST',
      headers: { authorization: `Bearer ${emu.accessToken}`, 'dropbox-api-arg': '{"path":"/f.bin"}' },
    });

  it('drops the connection mid-body after the given bytes', async () => {
    emu.faults.add({
      endpoint: 'files/download',
      nth: [0],
      action: { kind: 'reset', when: 'mid-body', afterBytes: 1000 },
    });
    const res = await download();
    expect(res.status).toBe(200);
    await expect(res.arrayBuffer()).rejects.toThrow();
    expect(Buffer.from(await (await download()).arrayBuffer()).equals(data)).toBe(true);
    emu.faults.clear();
  });

  it('resets before a request is handled, and after (the change happened, the answer was lost)', async () => {
    emu.faults.add({
      endpoint: 'files/create_folder_v2',
      nth: [0],
      action: { kind: 'reset', when: 'before' },
    });
    emu.faults.add({
      endpoint: 'files/create_folder_v2',
      nth: [1],
      action: { kind: 'reset', when: 'after' },
    });
    const mk = (path: string) =>
      fetch(`${emu.url}/2/files/create_folder_v2`, {
        method: 'POST',
        headers: { authorization: `Bearer ${emu.accessToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ path }),
      });
    await expect(mk('/before')).rejects.toThrow();
    expect(emu.tree.resolve('/before')).toBeUndefined();
    await expect(mk('/after')).rejects.toThrow();
    expect(emu.tree.resolve('/after')?.kind).toBe('folder');
    emu.faults.clear();
  });

  it('is set over HTTP too, and slows a body to the bandwidth cap without changing it', async () => {
    const rule = {
      endpoint: 'files/download',
      nth: [0],
      action: { kind: 'bandwidth', bytesPerSecond: 3_000_000 },
    };
    const set = await fetch(`${emu.url}/__emulator/faults`, { method: 'POST', body: JSON.stringify(rule) });
    expect(set.status).toBe(200);
    expect(Buffer.from(await (await download()).arrayBuffer()).equals(data)).toBe(true);
    const stats = (await (await fetch(`${emu.url}/__emulator/stats`)).json()) as {
      faults: { fired: Record<string, number> };
    };
    expect(stats.faults.fired['files/download:bandwidth']).toBe(1);
    expect((await fetch(`${emu.url}/__emulator/faults`, { method: 'DELETE' })).status).toBe(200);
    const bad = await fetch(`${emu.url}/__emulator/faults`, {
      method: 'POST',
      body: JSON.stringify({ action: { kind: 'nope' } }),
    });
    expect(bad.status).toBe(400);
  });
});

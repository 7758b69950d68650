/** The routing pieces of the inter-proxy link: sealed credentials, bandwidth figures exchanged between proxies, the new control messages. */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { openCredentials, ProxySelector, sealCredentials } from '../src/interproxy/index.ts';
import { DestinationMessage, parseMessage, SourceMessage } from '../src/interproxy/frames.ts';

describe('sealed credentials', () => {
  it('open only with the pair secret and the cloud they were sealed for', () => {
    const secret = randomBytes(32).toString('hex');
    const sealed = sealCredentials(secret, 'gdrive', { kind: 'gdrive', tokens: { accessToken: 'tok' } });
    expect(sealed).not.toContain('tok');
    expect(openCredentials(secret, 'gdrive', sealed)).toEqual({
      kind: 'gdrive',
      tokens: { accessToken: 'tok' },
    });
    expect(() => openCredentials(randomBytes(32).toString('hex'), 'gdrive', sealed)).toThrow();
    expect(() => openCredentials(secret, 'dropbox', sealed)).toThrow();
  });
});

describe('bandwidth figures between proxies', () => {
  it('a peer adopts our own figures (harmonic mean, age kept) and selects the +10 % set from both', () => {
    let now = 1_000_000;
    const a = new ProxySelector({ now: () => now });
    const b = new ProxySelector({ now: () => now });
    for (const r of [100, 200]) a.record('A', 'gdrive', r);
    b.record('B', 'gdrive', 1000);
    now += 5000;
    const fromA = a.own('A');
    expect(fromA).toEqual([
      { proxy: 'A', cloud: 'gdrive', bytesPerSecond: 2 / (1 / 100 + 1 / 200), ageMs: 5000 },
    ]);
    for (const m of fromA) b.adopt(m.proxy, m.cloud, m.bytesPerSecond, m.ageMs);
    for (const m of b.own('B')) a.adopt(m.proxy, m.cloud, m.bytesPerSecond, m.ageMs);
    expect(a.servers('gdrive')).toEqual(['B']);
    expect(b.servers('gdrive')).toEqual(['B']);
    expect(b.own('B')).toHaveLength(1); // a peer's figures are not re-announced as ours
    // A peer's figure that is already old ages out at the same moment as at its source.
    now += 30 * 60 * 1000 - 5000;
    expect(b.servers('gdrive')).toEqual(['B']);
    now += 1;
    expect(b.measurements().some((m) => m.proxy === 'A')).toBe(false);
  });
});

describe('control messages', () => {
  it('accept bandwidth / write / written / write-failed and refuse malformed ones', () => {
    const sha = 'a'.repeat(64);
    const ok = [
      { type: 'bandwidth', measurements: [{ proxy: 'p1', cloud: 'gdrive', bytesPerSecond: 5, ageMs: 0 }] },
      {
        type: 'write',
        id: 1,
        account: { cloud: 'gdrive', sealed: 'x' },
        path: 'share/a',
        cache: 'r/a',
        sha256: sha,
        size: 3,
        ifRevision: 'r1',
      },
    ];
    for (const m of ok) expect(parseMessage(SourceMessage, JSON.stringify(m))).toBeDefined();
    expect(parseMessage(SourceMessage, JSON.stringify({ ...ok[1], cache: '../a' }))).toBeUndefined();
    expect(
      parseMessage(
        SourceMessage,
        JSON.stringify({
          type: 'bandwidth',
          measurements: [{ proxy: 'p', cloud: 'g', bytesPerSecond: -1, ageMs: 0 }],
        }),
      ),
    ).toBeUndefined();
    expect(
      parseMessage(
        DestinationMessage,
        JSON.stringify({ type: 'written', id: 1, entry: { revision: 'r2', size: 3 } }),
      ),
    ).toBeDefined();
    expect(
      parseMessage(
        DestinationMessage,
        JSON.stringify({ type: 'write-failed', id: 1, code: 'PreconditionFailed', message: 'm' }),
      ),
    ).toBeDefined();
  });
});

/**
 * The scrub running while the tier is in use (issue #17: the proxy scrubs in the
 * background): a file deleted while the scrub reads its blobs is neither reported missing
 * nor "repaired" (which would write a blob back for an object being released and leave it
 * on the backend, referenced by nothing).
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryProvider } from '../src/adapters/memory.ts';
import { collect } from '../src/body.ts';
import type { Provider } from '../src/provider.ts';
import { BLOB_DIR, openRedundantProvider, scrub, type RedundantProvider } from '../src/redundant/index.ts';

const KiB = 1024;
const open: RedundantProvider[] = [];
afterEach(async () => {
  for (const t of open.splice(0)) await t.close().catch(() => undefined);
});

interface Hook {
  target?: string;
  hook?: () => Promise<void>;
}

/** A backend that runs `hook` once, before the first read of a blob of object `target`. */
function hooked(inner: Provider, state: Hook): Provider {
  return {
    name: inner.name,
    features: inner.features,
    list: (d, o) => inner.list(d, o),
    stat: (q, o) => inner.stat(q, o),
    read: async (q, o) => {
      const h = state.hook;
      if (h && state.target !== undefined && q.startsWith(`${BLOB_DIR}/`) && q.includes(state.target)) {
        state.hook = undefined;
        await h();
      }
      return inner.read(q, o);
    },
    write: (q, b, o) => inner.write(q, b, o),
    remove: (q, o) => inner.remove(q, o),
    mkdir: (q, o) => inner.mkdir(q, o),
  };
}

async function blobs(p: Provider): Promise<string[]> {
  const out: string[] = [];
  try {
    for await (const e of p.list(BLOB_DIR, { recursive: true })) if (e.kind === 'file') out.push(e.path);
  } catch {
    /* no blob folder */
  }
  return out;
}

describe('scrub while files are deleted', () => {
  for (const [layout, size] of [
    ['replicated', 3 * KiB],
    ['striped', 200 * KiB],
  ] as const) {
    it(`doesNotReportOrRebuildA${layout === 'striped' ? 'Striped' : 'Replicated'}ObjectDeletedUnderIt`, async () => {
      const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-scrub-race-'));
      const inner = [0, 1, 2, 3, 4].map(() => new MemoryProvider());
      const state: Hook = {};
      const tier = openRedundantProvider({
        backends: inner.map((p, i) => ({ id: `b${i}`, provider: hooked(p, state) })),
        dir,
        thresholdBytes: 64 * KiB,
        maxShardBytes: 64 * KiB,
        probeIntervalMs: 0,
      });
      open.push(tier);
      await tier.write('keep', Buffer.alloc(size, 1));
      await tier.write('gone', Buffer.alloc(size, 2));
      const goneId = (await tier.store.objectOf('gone'))!;
      // Just as the scrub reads the first blob of 'gone', the file is deleted.
      state.target = goneId;
      state.hook = async () => {
        await tier.remove('gone');
      };
      const report = await scrub(tier);
      expect(await tier.store.object(goneId)).toBeUndefined();
      expect(state.hook).toBeUndefined(); // it ran
      expect(report).toMatchObject({ missing: 0, corrupt: 0, repaired: 0, unrepairable: 0 });
      // Nothing of 'gone' was written back: only 'keep's blobs are left.
      const left = (await Promise.all(inner.map(blobs))).flat();
      const keepId = (await tier.store.objectOf('keep'))!;
      expect(left.length).toBeGreaterThan(0);
      expect(left.every((k) => k.includes(keepId))).toBe(true);
      expect((await collect(await tier.read('keep'))).equals(Buffer.alloc(size, 1))).toBe(true);
    });
  }
});

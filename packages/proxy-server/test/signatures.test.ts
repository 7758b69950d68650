/**
 * rsync signatures of large content (src/store/signatures.ts): an aid, never required.
 * Content whose staged file is gone by the time its signature is made (another proxy
 * instance's GC removed an abandoned transfer's staging file, issue #18's cluster test)
 * leaves no signature — and must not take the process down: the file stream was opened
 * before the signature encoder was ready, so its open error had no listener.
 */
import * as nodePath from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { FsProvider, MemoryProvider } from '@weft/providers';
import { ProxyMetrics } from '../src/metrics.ts';
import { putSignature } from '../src/store/signatures.ts';
import { tempDir } from './helpers.ts';

describe('rsync signatures', () => {
  it('aStagedFileGoneBeforeItsSignatureLeavesNoneAndNothingCrashes', async () => {
    const dir = await tempDir();
    const deps = {
      fs: await FsProvider.open({ root: dir }),
      objects: new MemoryProvider(),
      log: pino({ level: 'silent' }),
      metrics: new ProxyMetrics(),
      nsPath: (u: string, p: string) => `${u}/${p}`,
      pin: () => () => undefined,
      stageObject: () => Promise.reject(new Error('not used')),
    };
    const uncaught: unknown[] = [];
    const listener = (e: unknown): void => void uncaught.push(e);
    process.on('uncaughtException', listener);
    try {
      const made = await putSignature(deps, 'a'.repeat(64), {
        file: nodePath.join(dir, 'staging', 'gone'),
        size: 8 * 1024 * 1024,
      });
      expect(made).toBeUndefined();
      await new Promise((r) => setTimeout(r, 50));
    } finally {
      process.off('uncaughtException', listener);
    }
    expect(uncaught).toEqual([]);
  });
});

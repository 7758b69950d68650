/**
 * Answering the UI's status is work independent of the folder's size (issue #16: the agent
 * answers its UI within 100 ms at 100,000 files): no journal query, however many files
 * are synced or queued, and still the right counts. Counted, never timed.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { FolderStatusSchema, dispatch } from '@weft/ui-contract';
import { afterEach, describe, expect, it } from 'vitest';
import type { Journal } from '../src/journal/journal.ts';
import { memorySecretStore } from '../src/secret-store.ts';
import { type UiSession, createUiService } from '../src/ui-server/service.ts';
import { FakeCloud } from './support/fake-cloud.ts';

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

/** Counts every call of the journal's methods and of its database handle's. */
function countJournalCalls(journal: Journal): { calls: number } {
  const counter = { calls: 0 };
  const wrap = (target: object, names: Iterable<string>): void => {
    for (const name of names) {
      const fn = (target as Record<string, unknown>)[name];
      if (typeof fn !== 'function' || name === 'constructor') continue;
      Object.defineProperty(target, name, {
        configurable: true,
        value: (...args: unknown[]) => {
          counter.calls += 1;
          return (fn as (...a: unknown[]) => unknown).apply(target, args);
        },
      });
    }
  };
  wrap(journal, Object.getOwnPropertyNames(Object.getPrototypeOf(journal)));
  wrap(journal.db, ['prepare', 'exec', 'transaction', 'pragma']);
  return counter;
}

describe("the agent's status", () => {
  it('is answered without a journal query, with the right counts, at any number of files', async () => {
    const cloud = new FakeCloud();
    cleanup.push(() => cloud.close());
    const d = await cloud.addDevice('laptop');
    const stateDir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-status-work-'));
    cleanup.push(() => fsp.rm(stateDir, { recursive: true, force: true }));
    const session = {
      engine: d.engine,
      server: 'http://weft.test',
      user: 'me',
      deviceName: 'laptop',
      token: 't',
    };
    const ui = await createUiService({
      folder: d.folder,
      stateDir,
      session: () => session as UiSession,
      secrets: memorySecretStore(),
    });
    cleanup.push(() => ui.dispose());

    const statusAt = async (files: number): Promise<void> => {
      const counter = countJournalCalls(d.engine.journal);
      for (let i = 0; i < 20; i++) {
        const r = await dispatch(ui.handlers, 'getStatus', {});
        expect(r.ok).toBe(true);
        const s = FolderStatusSchema.parse(r.ok ? r.value : undefined);
        expect(s).toMatchObject({ state: 'idle', files, pendingOperations: 0 });
        expect(s.recent.length).toBeLessThanOrEqual(200);
      }
      FolderStatusSchema.parse(ui.status());
      expect(counter.calls).toBe(0);
      // The counter sees a query when there is one (the count a pass's end makes).
      expect(d.engine.journal.fileCount()).toBe(files);
      expect(counter.calls).toBeGreaterThan(0);
    };
    for (let i = 0; i < 50; i++) await d.write(`a/f${i}.txt`, `one ${i}`);
    await d.sync();
    await statusAt(50);
    for (let i = 0; i < 450; i++) await d.write(`b/f${i}.txt`, `two ${i}`);
    await d.sync();
    await statusAt(500);
  });
});

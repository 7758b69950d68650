// Conditional replacement of many files at once (fs/replace-many.ts, issue #16): the packer's
// drop of a pack's small files for their stubs. Each file is replaced only while it is still
// the revision given, renamed over (never overwritten: a reader of the old file keeps it);
// with the write-ahead log the batch costs one sync — no checkpoint of
// the log first, though the log holds the paths (each single write did one: a sync of the
// whole filesystem per dropped file), and no fsync per file — and a replay after a crash ends
// with the replacements. A crash is played as in fs-batch-log.test.ts: the provider left
// unclosed, what the page cache would have lost undone on disk, the folder opened again.
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { describe, expect, it } from 'vitest';
import { FsProvider } from '../src/adapters/fs.ts';
import { PreconditionFailedError } from '../src/errors.ts';
import type { Entry } from '../src/provider.ts';
import { countSyncs } from '../src/testing/count-syncs.ts';

const MTIME = 1_700_000_000_000;
const files = (n: number): { path: string; bytes: Buffer; modifiedMs: number }[] =>
  Array.from({ length: n }, (_, i) => ({
    path: `d${i % 4}/f${i}.txt`,
    bytes: Buffer.from(`file ${i} `.repeat(20)),
    modifiedMs: MTIME + i * 1000,
  }));
const stub = (i: number): Buffer => Buffer.from(`stub of ${i}\n`);

describe('fs tier: replaceMany', () => {
  it('replaces the files still at their revision with one sync and no checkpoint, and refuses the others', async () => {
    const root = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-fs-replace-'));
    const p = await FsProvider.open({ root, batchLog: { checkpointMs: 60_000 } });
    try {
      const batch = files(100);
      const written = (await p.writeMany(batch)) as Entry[];
      expect(written.filter((r) => r instanceof Error)).toEqual([]);
      // Since they were written: one file changed, one removed, one made a folder (each a
      // checkpoint: the log held them); then the others written again, logged and not yet
      // checkpointed — the log holds their paths when they are replaced.
      await p.write(batch[1]!.path, Buffer.from('edited'));
      await p.remove(batch[2]!.path);
      await p.remove(batch[3]!.path);
      await p.mkdir(batch[3]!.path);
      const rest = batch.map((f) => ({ ...f, bytes: Buffer.concat([f.bytes, Buffer.from('v2')]) })).slice(4);
      const again = (await p.writeMany(rest)) as Entry[];
      const revisions = [...written.slice(0, 4), ...again].map((e) => e.revision);
      const checkpoints = p.batchLogStats!.checkpoints;
      let out: (Entry | Error)[] = [];
      const syncs = await countSyncs(async () => {
        out = await p.replaceMany(
          batch.map((f, i) => ({
            path: f.path,
            bytes: stub(i),
            modifiedMs: f.modifiedMs,
            ifRevision: revisions[i]!,
          })),
        );
      });
      // The log held every path (written above, not yet checkpointed): still no checkpoint.
      expect(p.batchLogStats!.checkpoints).toBe(checkpoints);
      expect(syncs).toBe(1);
      for (const i of [1, 2, 3]) expect(out[i]).toBeInstanceOf(PreconditionFailedError);
      expect(await fsp.readFile(nodePath.join(root, batch[1]!.path), 'utf8')).toBe('edited');
      expect((await fsp.stat(nodePath.join(root, batch[3]!.path))).isDirectory()).toBe(true);
      for (const [i, f] of batch.entries()) {
        if ([1, 2, 3].includes(i)) continue;
        const e = out[i] as Entry;
        expect(e.revision).not.toBe(revisions[i]);
        expect(await fsp.readFile(nodePath.join(root, f.path))).toEqual(stub(i));
        expect((await p.stat(f.path)).revision).toBe(e.revision);
        expect(e.modifiedMs).toBe(f.modifiedMs);
      }
      // A second replacement against the old revision is refused: it changed.
      const late = await p.replaceMany([
        { path: batch[0]!.path, bytes: Buffer.from('late'), ifRevision: written[0]!.revision },
      ]);
      expect(late[0]).toBeInstanceOf(PreconditionFailedError);
      expect(await fsp.readFile(nodePath.join(root, batch[0]!.path))).toEqual(stub(0));
    } finally {
      await p.close();
      await fsp.rm(root, { recursive: true, force: true });
    }
  });

  it('renames each replacement over its file: a reader that opened the old file reads it whole', async () => {
    const root = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-fs-replace-'));
    const p = await FsProvider.open({ root, batchLog: { checkpointMs: 60_000 } });
    try {
      const batch = files(8);
      const written = (await p.writeMany(batch)) as Entry[];
      // A download of f5 that began before the pack was indexed: its file is open.
      const reading = await fsp.open(nodePath.join(root, batch[5]!.path), 'r');
      try {
        const out = await p.replaceMany(
          batch.map((f, i) => ({ path: f.path, bytes: stub(i), ifRevision: written[i]!.revision })),
        );
        expect(out.filter((r) => r instanceof Error)).toEqual([]);
        expect(await fsp.readFile(nodePath.join(root, batch[5]!.path))).toEqual(stub(5));
        // Overwritten in place, the open file would now be the stub (or cut short).
        const old = Buffer.alloc(batch[5]!.bytes.byteLength + 10);
        const { bytesRead } = await reading.read(old, 0, old.byteLength, 0);
        expect(old.subarray(0, bytesRead)).toEqual(batch[5]!.bytes);
      } finally {
        await reading.close();
      }
    } finally {
      await p.close();
      await fsp.rm(root, { recursive: true, force: true });
    }
  });

  it('ends a replay after a crash with the replacements, not with the files they replaced', async () => {
    const root = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-fs-replace-'));
    const p = await FsProvider.open({ root, batchLog: { checkpointMs: 60_000 } });
    const batch = files(40);
    const written = (await p.writeMany(batch)) as Entry[];
    const out = await p.replaceMany(
      batch.map((f, i) => ({
        path: f.path,
        bytes: stub(i),
        modifiedMs: f.modifiedMs,
        ifRevision: written[i]!.revision,
      })),
    );
    expect(out.filter((r) => r instanceof Error)).toEqual([]);
    // The crash: some renames never reached the disk (the old file is back), some stubs cut.
    for (let i = 0; i < 10; i++) await fsp.writeFile(nodePath.join(root, batch[i]!.path), batch[i]!.bytes);
    for (let i = 10; i < 20; i++) await fsp.truncate(nodePath.join(root, batch[i]!.path), 2);
    const q = await FsProvider.open({ root, batchLog: { checkpointMs: 60_000 } });
    try {
      expect(q.batchLogStats?.replayed).toBe(20);
      for (const [i, f] of batch.entries()) {
        expect(await fsp.readFile(nodePath.join(root, f.path))).toEqual(stub(i));
        expect((await q.stat(f.path)).modifiedMs).toBe(f.modifiedMs);
      }
    } finally {
      await q.close();
      await fsp.rm(root, { recursive: true, force: true });
    }
  });

  it('without the log, fsyncs each replacement and each folder once, and refuses a path given twice', async () => {
    const root = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-fs-replace-'));
    const p = await FsProvider.open({ root });
    try {
      const batch = files(20);
      const written = (await p.writeMany(batch)) as Entry[];
      let out: (Entry | Error)[] = [];
      const syncs = await countSyncs(async () => {
        out = await p.replaceMany([
          ...batch.map((f, i) => ({ path: f.path, bytes: stub(i), ifRevision: written[i]!.revision })),
          { path: batch[0]!.path, bytes: Buffer.from('twice'), ifRevision: written[0]!.revision },
        ]);
      });
      expect(syncs).toBe(20 + 4);
      expect(out.slice(0, 20).filter((r) => r instanceof Error)).toEqual([]);
      expect(out[20]).toBeInstanceOf(PreconditionFailedError);
      expect(await fsp.readFile(nodePath.join(root, batch[0]!.path))).toEqual(stub(0));
    } finally {
      await p.close();
      await fsp.rm(root, { recursive: true, force: true });
    }
  });
});

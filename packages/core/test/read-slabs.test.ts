/**
 * A bundle upload's files are read into a few reused slabs, not a fresh buffer per file
 * (issue #16: at 100,000 files those dead buffers piled up as the agent's RSS spike when
 * uploading started). A slab is used again only once every file read into it is released.
 */
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { readSmallFile } from '../src/local-fs.ts';
import { LoopGate, SLOW_RUN } from '../src/loop-gate.ts';
import { BUNDLE_BUFFER_BYTES, READ_SLAB_BYTES, ReadSlabs } from '../src/sync/propagate/read-slabs.ts';
import { BUNDLES_IN_FLIGHT } from '../src/sync/propagate/upload-bundle.ts';
import { type Drop, expectDropOnServer, fakeCloudPerTest, writeDrop } from './drop-shared.ts';

describe('read slabs', () => {
  it('hands out slices of one slab, and reuses a slab only once all of its slices are released', () => {
    const slabs = new ReadSlabs();
    const quarter = READ_SLAB_BYTES / 4;
    const a = [slabs.alloc(quarter), slabs.alloc(quarter), slabs.alloc(quarter), slabs.alloc(quarter)];
    expect(new Set(a.map((b) => b.buffer)).size).toBe(1);
    for (const [i, b] of a.entries()) b.fill(i + 1);
    slabs.release(a[0] as Buffer);
    slabs.release(a[1] as Buffer);
    // Two slices of the first slab still live: the next file goes into a second slab.
    const b = slabs.alloc(quarter);
    expect(b.buffer).not.toBe(a[0]?.buffer);
    b.fill(9);
    expect(a.slice(2).map((x) => [x[0], x[quarter - 1]])).toEqual([
      [3, 3],
      [4, 4],
    ]);
    expect(slabs.bytesAllocated).toBe(2 * READ_SLAB_BYTES);
    // All of the first slab released: it is used again instead of a third.
    slabs.release(a[2] as Buffer);
    slabs.release((a[3] as Buffer).subarray(0, 10));
    for (let i = 0; i < 3; i++) slabs.alloc(quarter);
    expect(slabs.alloc(quarter).buffer).toBe(a[0]?.buffer);
    expect(slabs.bytesAllocated).toBe(2 * READ_SLAB_BYTES);
    // A file of more than half a slab has its own buffer; empty files take nothing.
    expect(slabs.alloc(READ_SLAB_BYTES / 2 + 1).byteLength).toBe(READ_SLAB_BYTES / 2 + 1);
    expect(slabs.alloc(0).byteLength).toBe(0);
    expect(slabs.bytesAllocated).toBe(2.5 * READ_SLAB_BYTES + 1);
  });

  it('reads a file into the buffer given, and to its end when it grew since its stat, both ways', async () => {
    const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-read-slabs-'));
    try {
      const abs = nodePath.join(dir, 'f');
      for (const onLoop of [true, false]) {
        const gate = new LoopGate();
        if (!onLoop) for (let i = 0; i < SLOW_RUN; i++) gate.took(100); // through the pool
        await fsp.writeFile(abs, 'hello');
        const given: Buffer[] = [];
        const plain = await readSmallFile(
          abs,
          gate,
          (size) => given[given.push(Buffer.alloc(size)) - 1] as Buffer,
        );
        expect([plain.content.toString(), plain.content.buffer === given[0]?.buffer]).toEqual([
          'hello',
          true,
        ]);
        // The file grows between its stat and its read: the bytes after the stat's size too.
        const grown = await readSmallFile(abs, gate, (size) => {
          fs.appendFileSync(abs, ', world');
          return Buffer.alloc(size);
        });
        expect(grown.content.toString()).toBe('hello, world');
        expect(gate.calls[onLoop ? 'onLoop' : 'inPool']).toBe(2);
      }
    } finally {
      await fsp.rm(dir, { recursive: true, force: true });
    }
  });

  describe('a drop of many bundles', () => {
    const newCloud = fakeCloudPerTest();
    afterEach(() => {
      vi.restoreAllMocks();
    });

    it('reads its files into a few slabs, not a buffer per file, and uploads the right bytes', async () => {
      const cloud = newCloud();
      const d = await cloud.addDevice('laptop');
      // 512 files of 64 KiB: 32 MiB, eight bundles.
      const drop: Drop = { files: 512, size: 64 * 1024, pathOf: (i) => `drop/f${i}.bin` };
      await writeDrop(d, drop);
      // Bytes of the buffers the agent's small-file reads (the upload's: upload-read.ts)
      // allocate.
      let readBytes = 0;
      let readBuffers = 0;
      const count = (n: number): void => {
        if (!/local-fs\.ts|upload-read\.ts/.test(new Error().stack ?? '')) return;
        readBytes += n;
        readBuffers += 1;
      };
      const unsafe = Buffer.allocUnsafe.bind(Buffer);
      const slow = Buffer.allocUnsafeSlow.bind(Buffer);
      vi.spyOn(Buffer, 'allocUnsafe').mockImplementation((n: number) => (count(n), unsafe(n)));
      vi.spyOn(Buffer, 'allocUnsafeSlow').mockImplementation((n: number) => (count(n), slow(n)));
      await d.sync();
      vi.restoreAllMocks();
      expect(d.engine.journal.pendingCount()).toBe(0);
      expectDropOnServer(cloud, drop);
      // A fresh buffer per file was 512 buffers, 32 MiB. The slabs: the bundle being encoded,
      // the one being filled and the files read ahead of it.
      expect(readBuffers).toBeGreaterThan(0);
      expect(readBytes, `${readBuffers} read buffers`).toBeLessThanOrEqual(4 * READ_SLAB_BYTES);
    });

    it('encodes its bundles into a few reused buffers, across the runs of one upload', async () => {
      const cloud = newCloud();
      const d = await cloud.addDevice('laptop');
      // 2,100 files of 8 KiB: 16.4 MiB, five bundles, in two runs (push.ts sends 2,000 a run).
      const drop: Drop = { files: 2_100, size: 8 * 1024, pathOf: (i) => `drop/d${i % 7}/f${i}.bin` };
      await writeDrop(d, drop);
      // The memory each bundle was sent from: a fresh buffer per bundle was one each.
      const buffers = new Set<ArrayBufferLike>();
      let bundles = 0;
      const upload = d.remote.uploadBundle.bind(d.remote);
      d.remote.uploadBundle = async (bytes) => {
        bundles += 1;
        buffers.add(bytes.buffer);
        return upload(bytes);
      };
      await d.sync();
      expect(d.engine.journal.pendingCount()).toBe(0);
      expectDropOnServer(cloud, drop);
      expect(bundles).toBeGreaterThan(BUNDLES_IN_FLIGHT + 1);
      // One per bundle on its way and the one being encoded.
      expect(buffers.size).toBeLessThanOrEqual(BUNDLES_IN_FLIGHT + 1);
      for (const b of buffers) expect(b.byteLength).toBe(BUNDLE_BUFFER_BYTES);
    });
  });
});

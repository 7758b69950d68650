/**
 * What the tests of a large drop's upload share (bundles-in-flight.test.ts,
 * read-slabs.test.ts): a FakeCloud per test, files of bytes that do not deflate written on a
 * device, and the check that each is on the server with its content's hash.
 */
import { createHash } from 'node:crypto';
import { afterEach, expect } from 'vitest';
import { FakeCloud, type FakeDevice } from './support/fake-cloud.ts';

/** Bytes that do not deflate (so bundles are not compressed), the same for a seed every run. */
export function noise(size: number, seed: number): Buffer {
  const out = Buffer.alloc(size);
  let block = createHash('sha256').update(`seed ${seed}`).digest();
  for (let at = 0; at < size; at += block.length) {
    block.copy(out, at);
    block = createHash('sha256').update(block).digest();
  }
  return out;
}

/** A drop: `files` files of `size` noise bytes, file i (its seed) at `pathOf(i)`. */
export interface Drop {
  readonly files: number;
  readonly size: number;
  readonly pathOf: (i: number) => string;
}

/** Write the drop's files on device `d`. */
export async function writeDrop(d: FakeDevice, drop: Drop): Promise<void> {
  for (let i = 0; i < drop.files; i++) await d.write(drop.pathOf(i), noise(drop.size, i));
}

/** Every file of the drop is on the server with its content's hash. */
export function expectDropOnServer(cloud: FakeCloud, drop: Drop): void {
  const server = cloud.serverTree();
  for (let i = 0; i < drop.files; i++)
    expect(server.get(drop.pathOf(i))).toBe(createHash('sha256').update(noise(drop.size, i)).digest('hex'));
}

/** Call in a describe: each test gets a new FakeCloud from the function returned, closed after the test. */
export function fakeCloudPerTest(): () => FakeCloud {
  let cloud: FakeCloud | undefined;
  afterEach(async () => {
    await cloud?.close();
    cloud = undefined;
  });
  return () => (cloud = new FakeCloud());
}

/**
 * Running a scripted test on the harness: a fresh cloud closed afterwards, two devices, and
 * the convergence checks. Shared by the directed scenarios (scenarios.ts) and the bugs the
 * random schedules found (fake-cloud-found-bugs.test.ts).
 */
import { expect } from 'vitest';
import { FakeCloud, type FakeDevice, sorted } from './fake-cloud.ts';

/** Run `body` on a fresh cloud (small files up to `small` bytes if given), closed afterwards whatever happens. */
export async function onCloud(body: (cloud: FakeCloud) => Promise<void>, small?: number): Promise<void> {
  const cloud = new FakeCloud(small ? { smallFileBytes: small } : {});
  try {
    await body(cloud);
  } finally {
    await cloud.close();
  }
}

/** Settle, then every device holds what the server holds. */
export async function sameTrees(cloud: FakeCloud): Promise<void> {
  await cloud.settle();
  const server = sorted(cloud.serverTree());
  for (const d of cloud.devices)
    expect(sorted(await d.tree()), `${d.name} equals the server`).toEqual(server);
}

/** Settle, then every device holds what the server holds, none stopped, no queue left. */
export async function converged(cloud: FakeCloud): Promise<void> {
  await cloud.settle();
  const server = sorted(cloud.serverTree());
  for (const d of cloud.devices) {
    expect(d.engine.error, `${d.name} stopped`).toBeUndefined();
    expect(d.engine.journal.pendingOps(), `${d.name} queue`).toEqual([]);
    expect(sorted(await d.tree()), `${d.name} equals the server`).toEqual(server);
  }
}

/** Two devices of one user: laptop and desktop. */
export async function pair(cloud: FakeCloud): Promise<[FakeDevice, FakeDevice]> {
  return [await cloud.addDevice('laptop'), await cloud.addDevice('desktop')];
}

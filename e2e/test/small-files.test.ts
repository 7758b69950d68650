/**
 * 10,000 small real files (npm package sources) dropped into the folder arrive in the
 * proxy's store byte-identical, in bundles, and a second device receives them all.
 */
import { execFileSync } from 'node:child_process';
import * as nodePath from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  type Device,
  type TestProxy,
  cacheDir,
  copyTree,
  localTree,
  remoteTree,
  sorted,
  startDevice,
  startTestProxy,
} from '../src/harness.ts';

const PACKAGES = ['lodash@4.17.21', 'rxjs@7.8.1', 'date-fns@4.1.0', 'ramda@0.30.1', 'lodash-es@4.17.21'];
const SCRIPT = nodePath.resolve(new URL('../../../shared/corpus/small-files.sh', import.meta.url).pathname);

// On the embedded fs default only. An s3proxy variant ran here too, but every file of this
// corpus is under the 2 MiB large-file threshold, so it lives on the filesystem tier whatever
// the object tier is: that run repeated this one (160 s of CI) without reaching S3 (issue
// #16). Small files reach the object tier once packs exist; the s3 variant comes back with
// them. Both object tiers stay covered for large files by storm.test.ts and crash.test.ts.
describe.each(['fs'] as const)('small-file drop (object tier: %s)', (tier) => {
  let proxy: TestProxy;
  let a: Device;
  let b: Device;
  const corpus = nodePath.join(cacheDir(), 'small');

  beforeAll(async () => {
    execFileSync('bash', [SCRIPT, corpus, ...PACKAGES], { stdio: 'ignore' });
    proxy = await startTestProxy(tier === 'fs' ? 'fs' : inject('s3'));
    a = await startDevice(proxy, 'laptop');
    b = await startDevice(proxy, 'desktop');
  });

  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    await proxy?.close();
  });

  it('uploads every file in bundles and a second device receives them all', async () => {
    const count = await copyTree(corpus, nodePath.join(a.folder, 'corpus'));
    expect(count).toBeGreaterThanOrEqual(10_000);
    await a.engine.syncNow();
    expect(a.engine.error, String(a.engine.error)).toBeUndefined();
    expect(a.engine.journal.pendingOps()).toHaveLength(0);
    const requests = a.client.requests;
    const local = await localTree(a.folder);
    const remote = await remoteTree(a.client);
    expect(sorted(remote)).toEqual(sorted(local));
    // Bundled: far fewer requests than files.
    expect(requests).toBeLessThan(count / 20);
    expect(a.engine.getStatus().savings.requestsSavedByBundling).toBeGreaterThan(count * 0.9);
    await b.engine.syncNow();
    expect(sorted(await localTree(b.folder))).toEqual(sorted(local));
    // The second device pulls in bundles too (it listens to the feed while the first uploads).
    expect(b.client.requests).toBeLessThan(count / 20);
    process.stdout.write(
      `small-file drop (${tier}): ${count} files, ${requests} requests up, ${a.client.bytesSent} bytes sent; ` +
        `second device ${b.client.requests} requests, ${b.client.bytesReceived} bytes received\n`,
    );
  });
});

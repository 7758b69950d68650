import { randomBytes } from 'node:crypto';
import { ListMultipartUploadsCommand } from '@aws-sdk/client-s3';
import { inject } from 'vitest';
import { S3Provider } from '../src/adapters/s3.ts';
import { runProviderConformance } from '../src/conformance/index.ts';

const s3 = inject('s3');
let last: S3Provider | undefined;

runProviderConformance({
  name: `s3 (${s3.endpoint})`,
  create: async () => {
    last = new S3Provider({
      ...s3,
      credentials: s3,
      prefix: `conformance/${randomBytes(6).toString('hex')}`,
    });
    return last;
  },
  danglingUploads: async () => {
    if (!last) return 0;
    const out = await last.client.send(new ListMultipartUploadsCommand({ Bucket: s3.bucket }));
    return out.Uploads?.length ?? 0;
  },
  skip: {
    moveFile: 'S3 has no server-side move (features.move = false)',
    moveFolder: 'S3 has no server-side move (features.move = false)',
    copyFolder: "S3 copies single objects only (features.copy = 'files')",
    changeFeedOrderAndResume: 'S3 has no change feed in its API (features.changeFeed = false)',
    changeFeedFolderMove: 'S3 has neither a change feed nor a server-side move',
    mkdirOverFile:
      'S3 keys "f" and "f/" can coexist; the proxy filesystem tier prevents it (features.folders = "marker")',
    writeOverFolder: 'S3 keys "d" and "d/x" can coexist; the proxy filesystem tier prevents it',
  },
  timeoutMs: 120_000,
});

import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { FsProvider } from '../src/adapters/fs.ts';
import { runProviderConformance } from '../src/conformance/index.ts';

runProviderConformance({
  name: 'fs',
  create: async () => FsProvider.open({ root: await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-fs-')) }),
});

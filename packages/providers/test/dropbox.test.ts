import { randomBytes } from 'node:crypto';
import { afterAll } from 'vitest';
import { DropboxEmulator } from '@weft/cloud-emulators/dropbox';
import { DropboxProvider } from '../src/adapters/dropbox.ts';
import { runProviderConformance } from '../src/conformance/index.ts';

// With WEFT_TEST_DROPBOX_TOKEN the same suite runs against the real Dropbox (an app folder).
const realToken = process.env.WEFT_TEST_DROPBOX_TOKEN;
let emulator: Promise<DropboxEmulator> | undefined;
const realRoots: string[] = [];
afterAll(async () => {
  await (await emulator)?.close();
  // Against the real service, remove what the run made.
  if (realToken && realRoots.length > 0) {
    const top = new DropboxProvider({ token: realToken, root: '/weft-conformance' });
    for (const r of realRoots) await top.remove(r.slice(r.lastIndexOf('/') + 1)).catch(() => undefined);
  }
});

runProviderConformance({
  name: realToken ? 'dropbox (dropboxapi.com)' : 'dropbox (emulator)',
  create: async () => {
    const root = `/weft-conformance/${randomBytes(6).toString('hex')}`;
    if (realToken) realRoots.push(root);
    if (realToken) return new DropboxProvider({ token: realToken, root });
    emulator ??= new DropboxEmulator().start();
    const emu = await emulator;
    return new DropboxProvider({ token: emu.accessToken, root, baseUrl: emu.url });
  },
  coalescedChangeFeed: 'list_folder/continue returns the latest metadata of each changed path',
  timeoutMs: realToken ? 300_000 : 60_000,
});

import { randomBytes } from 'node:crypto';
import { afterAll } from 'vitest';
import { GDriveEmulator } from '@weft/cloud-emulators/gdrive';
import { GDriveProvider } from '../src/adapters/gdrive.ts';
import { runProviderConformance } from '../src/conformance/index.ts';

// With WEFT_TEST_GDRIVE_TOKEN the same suite runs against the real Google Drive.
const realToken = process.env.WEFT_TEST_GDRIVE_TOKEN;
let emulator: Promise<GDriveEmulator> | undefined;
const realRoots: string[] = [];
afterAll(async () => {
  await (await emulator)?.close();
  // Against the real service, remove what the run made.
  if (realToken && realRoots.length > 0) {
    const top = new GDriveProvider({ token: realToken, root: 'weft-conformance' });
    for (const r of realRoots) await top.remove(r.slice(r.lastIndexOf('/') + 1)).catch(() => undefined);
  }
});

runProviderConformance({
  name: realToken ? 'gdrive (googleapis.com)' : 'gdrive (emulator)',
  create: async () => {
    const root = `weft-conformance/${randomBytes(6).toString('hex')}`;
    if (realToken) realRoots.push(root);
    if (realToken) return new GDriveProvider({ token: realToken, root });
    emulator ??= new GDriveEmulator().start();
    const emu = await emulator;
    return new GDriveProvider({ token: emu.accessToken, root, rootUrl: emu.url });
  },
  danglingUploads: realToken ? undefined : async () => (await emulator)?.openSessions() ?? 0,
  skip: { copyFolder: "the Drive API copies files only (features.copy = 'files')" },
  coalescedChangeFeed: 'changes.list returns the latest state of each changed item',
  timeoutMs: realToken ? 300_000 : 60_000,
});

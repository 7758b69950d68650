import { randomBytes } from 'node:crypto';
import { afterAll, inject } from 'vitest';
import { OneDriveEmulator } from '@weft/cloud-emulators/onedrive';
import { OneDriveProvider } from '../src/adapters/onedrive.ts';
import { runProviderConformance } from '../src/conformance/index.ts';

// With WEFT_TEST_ONEDRIVE_TOKEN the same suite runs against the real Microsoft Graph.
const realToken = process.env.WEFT_TEST_ONEDRIVE_TOKEN;
let emulator: Promise<OneDriveEmulator> | undefined;
const realRoots: string[] = [];
afterAll(async () => {
  await (await emulator)?.close();
  // Against the real service, remove what the run made.
  if (realToken && realRoots.length > 0) {
    const top = new OneDriveProvider({ token: realToken, root: 'weft-conformance' });
    for (const r of realRoots) await top.remove(r.slice(r.lastIndexOf('/') + 1)).catch(() => undefined);
  }
});

runProviderConformance({
  name: realToken ? 'onedrive (graph.microsoft.com)' : 'onedrive (emulator, https)',
  create: async () => {
    const root = `weft-conformance/${randomBytes(6).toString('hex')}`;
    if (realToken) realRoots.push(root);
    if (realToken) return new OneDriveProvider({ token: realToken, root });
    emulator ??= new OneDriveEmulator({ tls: inject('emulatorTls') }).start();
    const emu = await emulator;
    return new OneDriveProvider({ token: emu.accessToken, root, graphOrigin: emu.apiOrigin });
  },
  danglingUploads: realToken ? undefined : async () => (await emulator)?.openSessions() ?? 0,
  skip: {
    specialCharacterNames: 'OneDrive refuses names with " * : < > ? / \\ | (the suite uses x?y.txt)',
  },
  coalescedChangeFeed: 'delta returns the latest state of each changed item',
  timeoutMs: realToken ? 300_000 : 60_000,
});

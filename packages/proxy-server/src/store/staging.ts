/** The hybrid store's staging folder: uploads being received and temp files (deltas). */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';

/** The path of staging file `id`, the folder made if missing (owner-only). */
export async function stagingFile(stagingDir: string, id: string): Promise<string> {
  await fsp.mkdir(stagingDir, { recursive: true, mode: 0o700 });
  return nodePath.join(stagingDir, id);
}

/** A fresh temp file name in the staging folder (removed by clearTemps at startup). */
export function tempFile(stagingDir: string): string {
  return nodePath.join(stagingDir, `tmp-${randomBytes(12).toString('hex')}`);
}

/** Remove the temp files a previous run left. */
export async function clearTemps(stagingDir: string): Promise<void> {
  await fsp.mkdir(stagingDir, { recursive: true, mode: 0o700 });
  for (const n of await fsp.readdir(stagingDir)) {
    if (n.startsWith('tmp-')) await fsp.rm(nodePath.join(stagingDir, n), { force: true });
  }
}

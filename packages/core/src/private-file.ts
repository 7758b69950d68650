/**
 * Files that hold a secret: written whole (temporary file, then rename) and readable by
 * this user only (0600) whatever the umask, also when an older copy had looser modes.
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';

export async function writePrivateFile(file: string, data: string | Uint8Array): Promise<void> {
  const tmp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    // 'wx': a fresh file, so the mode below is the one it was created with.
    await fsp.writeFile(tmp, data, { mode: 0o600, flag: 'wx' });
    await fsp.chmod(tmp, 0o600);
    await fsp.rename(tmp, file);
  } catch (e) {
    await fsp.rm(tmp, { force: true });
    throw e;
  }
}

/**
 * Secrets given to `weft agent` at start (a device token, an admin token) come from a file
 * readable only by this user, never from the command line, where every local user sees
 * them (`ps`, /proc/<pid>/cmdline).
 */
import * as fsp from 'node:fs/promises';

export class SecretFileError extends Error {
  override readonly name = 'SecretFileError';
}

/** The one-line secret in `file`; refused when others may read the file or it is not one token. */
export async function readSecretFile(file: string, what: string): Promise<string> {
  let st: import('node:fs').Stats;
  let text: string;
  try {
    st = await fsp.stat(file);
    text = await fsp.readFile(file, 'utf8');
  } catch (e) {
    throw new SecretFileError(`cannot read the ${what} file ${file}: ${(e as Error).message}`);
  }
  if (process.platform !== 'win32' && (st.mode & 0o077) !== 0)
    throw new SecretFileError(
      `the ${what} file ${file} can be read by other users (mode ${(st.mode & 0o777).toString(8)}): run chmod 600 ${file}`,
    );
  const secret = text.trim();
  if (!/^[\x21-\x7e]{16,512}$/.test(secret))
    throw new SecretFileError(`the ${what} file ${file} must hold the ${what} alone, on one line`);
  return secret;
}

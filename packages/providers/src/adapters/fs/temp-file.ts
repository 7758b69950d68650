/**
 * The filesystem tier's temp files (fs.ts): a write's body streamed into one, and a copy's
 * source copied into one, before either is renamed into place; a transfer's checks.
 */
import { createHash } from 'node:crypto';
import { type BigIntStats, constants as fsc } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { openBody, throwIfAborted } from '../../body.ts';
import { AlreadyExistsError, InvalidArgumentError, InvalidPathError, NotFoundError } from '../../errors.ts';
import { isWithin } from '../../paths.ts';
import type { Body, TransferOptions, WriteOptions } from '../../provider.ts';
import type { FsReader } from './read.ts';

/**
 * Write `body` to the new file `tmp` (its size, modification time and SHA-256 checked
 * against `options`), synced; returns its SHA-256 (hex). The caller removes `tmp` on failure.
 */
export async function writeTemp(
  tmp: string,
  body: Body,
  options: WriteOptions,
  deps: {
    readonly name: string;
    readonly path: string;
    readonly fileMode: number;
    /** Throws when the root itself is gone (a temp file that cannot be made: ENOENT). */
    readonly assertRoot: () => Promise<void>;
  },
): Promise<string> {
  const hash = createHash('sha256');
  let received = 0;
  const fh = await fsp.open(tmp, 'wx', deps.fileMode).catch(async (e: unknown) => {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') await deps.assertRoot();
    throw e;
  });
  try {
    for await (const chunk of openBody(body)) {
      throwIfAborted(options.signal);
      hash.update(chunk);
      received += chunk.byteLength;
      await fh.write(chunk);
    }
    throwIfAborted(options.signal);
    if (options.size !== undefined && options.size !== received) {
      throw new InvalidArgumentError(
        `${deps.name}: expected ${options.size} bytes for ${deps.path}, received ${received}`,
      );
    }
    if (options.modifiedMs !== undefined) {
      const t = new Date(options.modifiedMs);
      await fh.utimes(t, t);
    }
    await fh.sync();
  } finally {
    await fh.close();
  }
  return hash.digest('hex');
}

/** Copy the file or folder `from` (stat `src`) to the new `tmp`, times kept. */
export async function copyToTemp(from: string, src: BigIntStats, tmp: string): Promise<void> {
  if (src.isDirectory()) {
    await fsp.cp(from, tmp, {
      recursive: true,
      errorOnExist: true,
      preserveTimestamps: true,
    });
  } else {
    await fsp.copyFile(from, tmp, fsc.COPYFILE_EXCL);
    const fh = await fsp.open(tmp, 'r+');
    await fh.utimes(new Date(Number(src.atimeMs)), new Date(Number(src.mtimeMs)));
    await fh.sync();
    await fh.close();
  }
}

/**
 * A move's or copy's checks: `f` exists, `t` is not inside it, and `t` is free (or a file
 * that `overwrite` lets go; a change of case of the same name is no clash).
 */
export async function checkTransfer(
  reader: FsReader,
  name: string,
  lockKey: (p: string) => string,
  f: string,
  t: string,
  options: TransferOptions,
): Promise<{ src: BigIntStats }> {
  const src = await reader.lstatEntry(f);
  if (!src) throw new NotFoundError(`${name}: not found: ${f}`);
  const sameName = lockKey(f) === lockKey(t);
  if (!sameName && isWithin(lockKey(t), lockKey(f))) {
    throw new InvalidPathError(`${name}: cannot put ${f} inside itself`, t);
  }
  const dst = sameName && f !== t ? undefined : await reader.lstatEntry(t);
  if (dst && !sameName) {
    if (dst.isDirectory() || src.isDirectory() || !options.overwrite) {
      throw new AlreadyExistsError(`${name}: ${t} exists`);
    }
  }
  return { src };
}

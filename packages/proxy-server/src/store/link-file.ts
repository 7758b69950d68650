/**
 * Link files: the filesystem tier's stand-in for a large file (docs/formats/link-file.md).
 * A large file `a/b.iso` is the object `objects/<sha256>` in the object tier plus the small
 * JSON file `a/b.iso.weftlink` in the namespace tree.
 */
import { suggestStrongLength } from '@weft/rsync-wasm';
import { z } from 'zod/v4';

export const LINK_EXTENSION = '.weftlink';
export const LINK_VERSION = 1;
/** Bytes covered by one entry of the chunk list. */
export const LINK_CHUNK_BYTES = 4 * 1024 * 1024;
const MAX_LINK_BYTES = 4 * 1024 * 1024;

const Hex64 = z.string().regex(/^[0-9a-f]{64}$/);

export const LinkFile = z.object({
  weftLink: z.literal(LINK_VERSION),
  sha256: Hex64,
  size: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  mtimeMs: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  /** Object key in the object tier. */
  object: z.string().min(1),
  /** SHA-256 of each LINK_CHUNK_BYTES piece, in order (the last may be shorter). */
  chunks: z.array(
    z.object({ offset: z.number().int().min(0), length: z.number().int().min(0), sha256: Hex64 }),
  ),
  /** Where an rsync signature of the content is kept in the object tier, if one was made. */
  signature: z.object({ object: z.string().min(1), blockSize: z.number().int().positive() }).nullable(),
});
export type LinkFile = z.infer<typeof LinkFile>;

export class LinkFileError extends Error {
  override readonly name = 'LinkFileError';
}

export function objectKey(sha256: string): string {
  return `objects/${sha256.slice(0, 2)}/${sha256.slice(2, 4)}/${sha256}`;
}

/** Object-tier key of the rsync-wasm signature of content `sha256` made with `blockSize`. */
export function signatureKey(sha256: string, blockSize: number): string {
  return `signatures/${sha256.slice(0, 2)}/${sha256.slice(2, 4)}/${sha256}.${blockSize}`;
}

/**
 * Block size of the signatures the server makes: about √size (rsync's rule), a power of two
 * between 2 KiB and 64 KiB, so a signature is about 12 bytes per block (≤ 0.6 % of the file).
 */
export function signatureBlockSize(size: number): number {
  let b = 2048;
  while (b < 65536 && b * b < size) b *= 2;
  return b;
}

/**
 * Strong-hash bytes per block of a server-made signature: as rsync sizes it for this file
 * and block (a false block match ~2⁻¹⁰ per file), plus one byte (~2⁻¹⁸), at most 8. A false
 * match fails the delta's whole-file checksum; the delta is refused and the client sends the
 * whole file. 4 + 3 bytes a block for a 22 MB file instead of 4 + 8.
 */
export function signatureStrongLength(size: number, blockSize: number): number {
  return Math.min(8, suggestStrongLength(Math.max(1, size), blockSize) + 1);
}

export function encodeLinkFile(link: LinkFile): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(link) + '\n');
}

export function decodeLinkFile(bytes: Uint8Array): LinkFile {
  if (bytes.byteLength > MAX_LINK_BYTES) throw new LinkFileError('link file too large');
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (cause) {
    throw new LinkFileError('link file is not JSON', { cause });
  }
  const parsed = LinkFile.safeParse(json);
  if (!parsed.success) throw new LinkFileError(`link file: ${parsed.error.message}`);
  if (parsed.data.object !== objectKey(parsed.data.sha256))
    throw new LinkFileError('link file names a foreign object key');
  const sig = parsed.data.signature;
  if (sig && sig.object !== signatureKey(parsed.data.sha256, sig.blockSize))
    throw new LinkFileError('link file names a foreign signature key');
  return parsed.data;
}

export function isLinkName(name: string): boolean {
  return name.toLowerCase().endsWith(LINK_EXTENSION);
}

/**
 * The providers' own content hashes, implemented from their published descriptions:
 * - Dropbox content_hash: split the file into 4 MiB blocks, SHA-256 each block, then
 *   SHA-256 the concatenation of the block digests; lower-case hex.
 *   https://www.dropbox.com/developers/reference/content-hash
 * - OneDrive quickXorHash: bytes XOR-ed into a 160-bit circular register, each byte
 *   shifted 11 bits further than the one before; the length (64-bit little-endian) is
 *   XOR-ed into the last 8 bytes; base64.
 *   https://learn.microsoft.com/onedrive/developer/code-snippets/quickxorhash
 */
import { createHash, type Hash } from 'node:crypto';

export const DROPBOX_BLOCK = 4 * 1024 * 1024;

/** Streaming Dropbox content_hash. */
export class DropboxContentHasher {
  private overall: Hash = createHash('sha256');
  private block: Hash = createHash('sha256');
  private inBlock = 0;
  private blocks = 0;

  update(data: Uint8Array): this {
    let offset = 0;
    while (offset < data.byteLength) {
      const take = Math.min(DROPBOX_BLOCK - this.inBlock, data.byteLength - offset);
      this.block.update(data.subarray(offset, offset + take));
      this.inBlock += take;
      offset += take;
      if (this.inBlock === DROPBOX_BLOCK) this.finishBlock();
    }
    return this;
  }

  private finishBlock(): void {
    this.overall.update(this.block.digest());
    this.blocks += 1;
    this.block = createHash('sha256');
    this.inBlock = 0;
  }

  digestHex(): string {
    if (this.inBlock > 0) this.finishBlock();
    return this.overall.digest('hex');
  }
}

export function dropboxContentHash(data: Uint8Array): string {
  return new DropboxContentHasher().update(data).digestHex();
}

const QX_WIDTH_BYTES = 20; // 160 bits
const QX_SHIFT = 11;

/** Streaming OneDrive quickXorHash. */
export class QuickXorHasher {
  private readonly state = new Uint8Array(QX_WIDTH_BYTES);
  private length = 0;
  /** Bit position (0..159) where the next byte goes. */
  private bit = 0;

  update(data: Uint8Array): this {
    const state = this.state;
    let bit = this.bit;
    for (let i = 0; i < data.byteLength; i++) {
      const b = data[i] as number;
      const index = bit >>> 3;
      const shift = bit & 7;
      state[index] = (state[index] as number) ^ ((b << shift) & 0xff);
      if (shift > 0) {
        const next = index + 1 === QX_WIDTH_BYTES ? 0 : index + 1;
        state[next] = (state[next] as number) ^ (b >>> (8 - shift));
      }
      bit += QX_SHIFT;
      if (bit >= 160) bit -= 160;
    }
    this.bit = bit;
    this.length += data.byteLength;
    return this;
  }

  digestBase64(): string {
    const out = Buffer.from(this.state);
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(this.length));
    for (let i = 0; i < 8; i++) {
      const at = QX_WIDTH_BYTES - 8 + i;
      out[at] = (out[at] as number) ^ (len[i] as number);
    }
    return out.toString('base64');
  }
}

export function quickXorHash(data: Uint8Array): string {
  return new QuickXorHasher().update(data).digestBase64();
}

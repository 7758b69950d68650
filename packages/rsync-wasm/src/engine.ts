// Thin drivers around one wasm instance each. `emit` callbacks receive views into wasm
// memory that are valid only until the next call into the engine: copy what you keep.
import {
  CHECKSUM_SIZE,
  DEFAULT_STRONG_LENGTH,
  OP_END,
  checkBlockSize,
  checkStrongLength,
  encodeDeltaHeader,
  encodeSignatureHeader,
  encodeSignatureTrailer,
  writeVarint,
  type Signature,
} from './format.ts';
import { bytesAt, instantiate, type RsyncWasm } from './wasm.ts';

export type Emit = (bytes: Uint8Array) => void;

export class SignatureEncoder {
  private length = 0;

  private constructor(
    private readonly wasm: RsyncWasm,
    readonly blockSize: number,
    readonly strongLength: number,
  ) {}

  static async create(blockSize: number, strongLength = DEFAULT_STRONG_LENGTH): Promise<SignatureEncoder> {
    checkBlockSize(blockSize);
    checkStrongLength(strongLength);
    const wasm = await instantiate();
    wasm.sigInit(blockSize, strongLength);
    return new SignatureEncoder(wasm, blockSize, strongLength);
  }

  header(): Uint8Array {
    return encodeSignatureHeader(this.blockSize, this.strongLength);
  }

  /** Size of this engine's wasm memory (for tests of bounded memory). */
  get memoryBytes(): number {
    return this.wasm.memory.buffer.byteLength;
  }

  update(chunk: Uint8Array, emit: Emit): void {
    const w = this.wasm;
    const cap = w.sigInputCap();
    for (let offset = 0; offset < chunk.length;) {
      const n = Math.min(cap, chunk.length - offset);
      bytesAt(w, w.sigInputPtr(), n).set(chunk.subarray(offset, offset + n));
      const produced = w.sigUpdate(n);
      if (produced > 0) emit(bytesAt(w, w.sigOutputPtr(), produced));
      offset += n;
    }
    this.length += chunk.length;
  }

  /** Emits the last record and the trailer. */
  finish(emit: Emit): void {
    const produced = this.wasm.sigFinish();
    if (produced > 0) emit(bytesAt(this.wasm, this.wasm.sigOutputPtr(), produced));
    emit(encodeSignatureTrailer(this.length));
  }
}

export class DeltaEncoder {
  private length = 0;

  private constructor(
    private readonly wasm: RsyncWasm,
    private readonly signature: Signature,
    private readonly checksum: boolean,
  ) {}

  static async create(signature: Signature, checksum: boolean): Promise<DeltaEncoder> {
    const wasm = await instantiate();
    const { blockSize, strongLength, blockCount, oldLength, records } = signature;
    const lastLength = blockCount === 0 ? 0 : oldLength - (blockCount - 1) * blockSize;
    wasm.deltaInit(blockSize, strongLength, blockCount, lastLength, checksum ? 1 : 0);
    bytesAt(wasm, wasm.deltaRecordsPtr(), records.length).set(records);
    wasm.deltaBuild();
    return new DeltaEncoder(wasm, signature, checksum);
  }

  get memoryBytes(): number {
    return this.wasm.memory.buffer.byteLength;
  }

  header(): Uint8Array {
    return encodeDeltaHeader(this.signature.oldLength, this.signature.blockSize, this.checksum);
  }

  update(chunk: Uint8Array, emit: Emit): void {
    const w = this.wasm;
    for (let offset = 0; offset < chunk.length;) {
      w.deltaCompact();
      const n = Math.min(w.deltaInputSpace(), chunk.length - offset);
      bytesAt(w, w.deltaInputPtr(), n).set(chunk.subarray(offset, offset + n));
      w.deltaAppend(n);
      offset += n;
      this.run(false, emit);
    }
    this.length += chunk.length;
  }

  private run(last: boolean, emit: Emit): void {
    const w = this.wasm;
    do {
      const produced = w.deltaRun(last ? 1 : 0);
      if (produced > 0) emit(bytesAt(w, w.deltaOutputPtr(), produced));
    } while (w.deltaPending());
  }

  /** Emits the remaining instructions and END (with the whole-file checksum if enabled). */
  finish(emit: Emit): void {
    this.run(true, emit);
    const end: number[] = [OP_END];
    writeVarint(end, this.length);
    emit(Uint8Array.from(end));
    if (this.checksum) emit(bytesAt(this.wasm, this.wasm.deltaFinalHash(), CHECKSUM_SIZE));
  }
}

/** Incremental BLAKE2b-256. */
export class Blake2b256 {
  private constructor(private readonly wasm: RsyncWasm) {}

  static async create(): Promise<Blake2b256> {
    const wasm = await instantiate();
    wasm.hashInit();
    return new Blake2b256(wasm);
  }

  update(bytes: Uint8Array): void {
    const w = this.wasm;
    const cap = w.hashInputCap();
    for (let offset = 0; offset < bytes.length; offset += cap) {
      const n = Math.min(cap, bytes.length - offset);
      bytesAt(w, w.hashInputPtr(), n).set(bytes.subarray(offset, offset + n));
      w.hashUpdate(n);
    }
  }

  digest(): Uint8Array {
    return bytesAt(this.wasm, this.wasm.hashFinal(), CHECKSUM_SIZE).slice();
  }
}

/** Recomputes the delta checksum from patch output (see docs/formats/delta.md, "Checksum"). */
export class TreeVerifier {
  private constructor(private readonly wasm: RsyncWasm) {}

  static async create(blockSize: number): Promise<TreeVerifier> {
    const wasm = await instantiate();
    wasm.verifyInit(blockSize);
    return new TreeVerifier(wasm);
  }

  private feed(bytes: Uint8Array, step: (n: number) => void): void {
    const w = this.wasm;
    const cap = w.verifyInputCap();
    for (let offset = 0; offset < bytes.length; offset += cap) {
      const n = Math.min(cap, bytes.length - offset);
      bytesAt(w, w.verifyInputPtr(), n).set(bytes.subarray(offset, offset + n));
      step(n);
    }
  }

  literal(bytes: Uint8Array): void {
    this.feed(bytes, (n) => this.wasm.verifyLiteral(n));
  }

  copy(bytes: Uint8Array): void {
    this.feed(bytes, (n) => this.wasm.verifyCopy(n));
  }

  /** Ends the current instruction. */
  endInstruction(): void {
    this.wasm.verifyEndLeaf();
  }

  digest(): Uint8Array {
    return bytesAt(this.wasm, this.wasm.verifyFinal(), CHECKSUM_SIZE).slice();
  }
}

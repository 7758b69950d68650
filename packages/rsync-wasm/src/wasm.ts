import { wasmLoader } from './wasm-loader.ts';
import { WasmLoadError } from './errors.ts';

/** Exports of build/rsync.wasm (see assembly/index.ts). Pointers are byte offsets into memory. */
export interface RsyncWasm {
  readonly memory: { readonly buffer: ArrayBuffer };
  hashInit(): void;
  hashInputPtr(): number;
  hashInputCap(): number;
  hashUpdate(n: number): void;
  hashFinal(): number;
  sigInit(blockSize: number, strongLength: number): void;
  sigInputPtr(): number;
  sigInputCap(): number;
  sigOutputPtr(): number;
  sigUpdate(n: number): number;
  sigFinish(): number;
  deltaInit(
    blockSize: number,
    strongLength: number,
    blocks: number,
    lastLength: number,
    hashWhole: number,
  ): void;
  deltaRecordsPtr(): number;
  deltaBuild(): void;
  deltaInputPtr(): number;
  deltaInputSpace(): number;
  deltaCompact(): void;
  deltaAppend(n: number): void;
  deltaOutputPtr(): number;
  deltaPending(): number;
  deltaRun(last: number): number;
  deltaFinalHash(): number;
  verifyInit(blockSize: number): void;
  verifyInputPtr(): number;
  verifyInputCap(): number;
  verifyEndLeaf(): void;
  verifyLiteral(n: number): void;
  verifyCopy(n: number): void;
  verifyFinal(): number;
}

/** A fresh module instance: each engine (signature, delta, hasher) owns one. */
export const instantiate = wasmLoader<RsyncWasm>({
  url: new URL('../build/rsync.wasm', import.meta.url),
  packageName: '@weft/rsync-wasm',
  error: (message, options) => new WasmLoadError(message, options),
});

/** A view of wasm memory; recreate after any call that may grow memory. */
export function bytesAt(wasm: RsyncWasm, ptr: number, length: number): Uint8Array {
  return new Uint8Array(wasm.memory.buffer, ptr, length);
}

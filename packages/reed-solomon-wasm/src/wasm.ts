import { wasmLoader } from '@weft/rsync-wasm/wasm-loader';
import { WasmLoadError } from './errors.ts';

/** Exports of build/reed-solomon.wasm (see assembly/index.ts). */
export interface ReedSolomonWasm {
  readonly memory: { readonly buffer: ArrayBuffer };
  init(maxIn: number, maxOut: number, segment: number): void;
  inputPtr(): number;
  outputPtr(): number;
  coefficientPtr(): number;
  segmentSize(): number;
  inputTablePtr(): number;
  outputTablePtr(): number;
  stripeAlloc(bytes: number): number;
  prepare(nOut: number, nIn: number): void;
  matMul(nOut: number, nIn: number, length: number): void;
}

/** A fresh module instance. */
export const instantiate = wasmLoader<ReedSolomonWasm>({
  url: new URL('../build/reed-solomon.wasm', import.meta.url),
  packageName: '@weft/reed-solomon-wasm',
  error: (message, options) => new WasmLoadError(message, options),
});

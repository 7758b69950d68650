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

/** The part of the WebAssembly JS API we use (the root tsconfig has no DOM lib). */
interface WebAssemblyApi {
  compile(bytes: Uint8Array): Promise<object>;
  instantiate(
    module: object,
    imports: Record<string, Record<string, unknown>>,
  ): Promise<{ exports: unknown }>;
}
const wasmApi = (globalThis as unknown as { WebAssembly: WebAssemblyApi }).WebAssembly;

const WASM_URL = new URL('../build/reed-solomon.wasm', import.meta.url);

let compiled: Promise<object> | undefined;

async function readWasmBytes(): Promise<Uint8Array> {
  const isNode = typeof process !== 'undefined' && typeof process.versions?.node === 'string';
  if (isNode) {
    const { readFile } = await import('node:fs/promises');
    return await readFile(WASM_URL);
  }
  const response = await fetch(WASM_URL);
  if (!response.ok) throw new Error(`HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

function compile(): Promise<object> {
  compiled ??= readWasmBytes().then(
    (bytes) => wasmApi.compile(bytes),
    (cause: unknown) => {
      compiled = undefined;
      throw new WasmLoadError(
        `cannot load ${WASM_URL.href}; run \`npm run build -w @weft/reed-solomon-wasm\` first`,
        {
          cause,
        },
      );
    },
  );
  return compiled;
}

export async function instantiate(): Promise<ReedSolomonWasm> {
  const module = await compile();
  const instance = await wasmApi.instantiate(module, {
    env: {
      abort(): never {
        throw new WasmLoadError('reed-solomon.wasm aborted');
      },
    },
  });
  return instance.exports as ReedSolomonWasm;
}

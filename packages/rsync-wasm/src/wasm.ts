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

/** The part of the WebAssembly JS API we use (the root tsconfig has no DOM lib). */
interface WebAssemblyApi {
  compile(bytes: Uint8Array): Promise<object>;
  instantiate(
    module: object,
    imports: Record<string, Record<string, unknown>>,
  ): Promise<{ exports: unknown }>;
}
const wasmApi = (globalThis as unknown as { WebAssembly: WebAssemblyApi }).WebAssembly;

const WASM_URL = new URL('../build/rsync.wasm', import.meta.url);

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
        `cannot load ${WASM_URL.href}; run \`npm run build -w @weft/rsync-wasm\` first`,
        { cause },
      );
    },
  );
  return compiled;
}

/** A fresh module instance: each engine (signature, delta, hasher) owns one. */
export async function instantiate(): Promise<RsyncWasm> {
  const module = await compile();
  const instance = await wasmApi.instantiate(module, {
    env: {
      abort(): never {
        throw new WasmLoadError('rsync.wasm aborted');
      },
    },
  });
  return instance.exports as unknown as RsyncWasm;
}

/** A view of wasm memory; recreate after any call that may grow memory. */
export function bytesAt(wasm: RsyncWasm, ptr: number, length: number): Uint8Array {
  return new Uint8Array(wasm.memory.buffer, ptr, length);
}

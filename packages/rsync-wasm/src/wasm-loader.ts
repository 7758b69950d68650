/**
 * Loading an AssemblyScript module built into a package's build/ folder, in Node (read
 * from disk) and in a browser (fetched): compiled once per process, instantiated afresh
 * for each caller (each engine owns its memory). Shared by @weft/rsync-wasm and
 * @weft/reed-solomon-wasm.
 */

/** The part of the WebAssembly JS API we use (the root tsconfig has no DOM lib). */
interface WebAssemblyApi {
  compile(bytes: Uint8Array): Promise<object>;
  instantiate(
    module: object,
    imports: Record<string, Record<string, unknown>>,
  ): Promise<{ exports: unknown }>;
}
const wasmApi = (globalThis as unknown as { WebAssembly: WebAssemblyApi }).WebAssembly;

export interface WasmModuleSource {
  /** The built module, e.g. new URL('../build/rsync.wasm', import.meta.url). */
  readonly url: URL;
  /** The package that builds it (named in the error when it is missing). */
  readonly packageName: string;
  /** The package's own error for a missing or failing module. */
  readonly error: (message: string, options?: { cause?: unknown }) => Error;
}

async function readWasmBytes(url: URL): Promise<Uint8Array> {
  const isNode = typeof process !== 'undefined' && typeof process.versions?.node === 'string';
  if (isNode) {
    const { readFile } = await import('node:fs/promises');
    return await readFile(url);
  }
  const response = await fetch(url);
  if (!response.ok) throw new Error(`HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

/** A function that gives a fresh instance of the module (compiling it on first use). */
export function wasmLoader<T>(source: WasmModuleSource): () => Promise<T> {
  const name = source.url.pathname.slice(source.url.pathname.lastIndexOf('/') + 1);
  let compiled: Promise<object> | undefined;
  const compile = (): Promise<object> => {
    compiled ??= readWasmBytes(source.url).then(
      (bytes) => wasmApi.compile(bytes),
      (cause: unknown) => {
        compiled = undefined;
        throw source.error(
          `cannot load ${source.url.href}; run \`npm run build -w ${source.packageName}\` first`,
          { cause },
        );
      },
    );
    return compiled;
  };
  return async () => {
    const instance = await wasmApi.instantiate(await compile(), {
      env: {
        abort(): never {
          throw source.error(`${name} aborted`);
        },
      },
    });
    return instance.exports as T;
  };
}

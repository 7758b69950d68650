/** Bytes in any of the shapes Node and browsers hand out: a buffer, or (async) chunks of one. */
export type ByteSource = Uint8Array | Iterable<Uint8Array> | AsyncIterable<Uint8Array>;

const SLICE = 1 << 20;

function isAsyncIterable(value: unknown): value is AsyncIterable<Uint8Array> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value;
}

/** Iterates a source as chunks; a single buffer is cut into 1 MiB views (no copies). */
export async function* chunksOf(source: ByteSource): AsyncGenerator<Uint8Array, void, undefined> {
  if (source instanceof Uint8Array) {
    for (let offset = 0; offset < source.length; offset += SLICE) {
      yield source.subarray(offset, Math.min(source.length, offset + SLICE));
    }
    return;
  }
  if (isAsyncIterable(source)) {
    for await (const chunk of source) yield chunk;
    return;
  }
  for (const chunk of source) yield chunk;
}

/** Concatenates a whole source into one buffer (for small things such as signatures). */
export async function collect(source: ByteSource): Promise<Uint8Array> {
  if (source instanceof Uint8Array) return source;
  const parts: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of chunksOf(source)) {
    parts.push(chunk);
    total += chunk.length;
  }
  if (parts.length === 1 && parts[0]) return parts[0];
  const out = new Uint8Array(total);
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

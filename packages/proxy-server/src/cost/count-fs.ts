/**
 * The filesystem tier counted like any backend: the Provider calls go through a
 * CountingProvider; the FsProvider's own batch write (`writeMany`) counts one PUT per file.
 * Everything else reaches the FsProvider itself.
 */
import { CountingProvider, type FsProvider, type RequestSink } from '@weft/providers';

const COUNTED = new Set<PropertyKey>(['list', 'stat', 'read', 'write', 'remove', 'mkdir', 'move', 'copy']);

export function countFs(fs: FsProvider, sink: RequestSink): FsProvider {
  const counted = new CountingProvider(fs, sink);
  return new Proxy(fs, {
    get(target, prop) {
      if (COUNTED.has(prop)) {
        const m = (counted as unknown as Record<PropertyKey, unknown>)[prop];
        return typeof m === 'function' ? (m as (...a: unknown[]) => unknown).bind(counted) : m;
      }
      if (prop === 'writeMany') {
        return (items: readonly { bytes: Uint8Array }[], ...rest: unknown[]) => {
          sink(
            'put',
            items.length,
            items.reduce((n, i) => n + i.bytes.byteLength, 0),
          );
          return (target.writeMany as (...a: unknown[]) => unknown)(items, ...rest);
        };
      }
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

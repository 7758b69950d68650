/** Reading the namespace: list a folder, stat one entry, download a file (one byte range). */
import { Readable } from 'node:stream';
import { EntryInfo, ListQuery, ListResponse, PathQuery } from '@weft/wire';
import { ApiError } from '../errors.ts';
import type { HybridStore } from '../store/hybrid.ts';
import { publicEntry } from '../store/metadata.ts';
import { entryAt, fileHeaders, type RouteContext } from './route.ts';

export function registerFileRoutes(
  ctx: RouteContext,
  deps: { store: HybridStore; onRead?: (sha256: string) => void },
): void {
  const { route, auth, parse } = ctx;
  const { store } = deps;
  const stat = (userId: string, path: string): Promise<EntryInfo | undefined> => store.stat(userId, path);

  route(
    {
      method: 'GET',
      url: '/v1/list',
      summary: 'List a folder',
      auth: 'device',
      query: ListQuery,
      response: ListResponse,
    },
    async (req) => {
      const a = auth(req);
      const q = parse(ListQuery, req.query);
      if (q.limit !== undefined) return listPage(store, a.userId, q);
      if (q.after !== undefined || q.seq !== undefined)
        throw new ApiError('BAD_REQUEST', '`after` and `seq` page a listing: give `limit` too');
      // The seq first: a change landing between the two reads is in the listing and replayed
      // from the feed after it (harmless), never missing from both.
      const seq = await store.meta.currentSeq(a.userId);
      const entries = await store.list(a.userId, q.path, q.recursive === '1' || q.recursive === 'true');
      return { entries, seq };
    },
  );

  route(
    {
      method: 'GET',
      url: '/v1/stat',
      summary: 'One entry',
      auth: 'device',
      query: PathQuery,
      response: EntryInfo,
    },
    async (req) => (await entryAt(ctx, stat, req, PathQuery)).e,
  );

  route(
    {
      method: 'GET',
      url: '/v1/files',
      summary: 'Download a file (Range supported)',
      auth: 'device',
      query: PathQuery,
      binaryResponse: 'application/octet-stream',
    },
    async (req, reply) => {
      const { a, e } = await entryAt(ctx, stat, req, PathQuery, 'file');
      const range = parseRange(req.headers.range, e.size);
      const { stream } = await store.openRead(a.userId, e, range && e.size > 0 ? range : undefined);
      if (e.tier === 'small' && e.sha256) deps.onRead?.(e.sha256);
      fileHeaders(reply, e);
      void reply.header('accept-ranges', 'bytes');
      if (range) {
        void reply
          .code(206)
          .header('content-range', `bytes ${range.start}-${range.end}/${e.size}`)
          .header('content-length', String(range.end - range.start + 1));
      } else void reply.header('content-length', String(e.size));
      void reply.type('application/octet-stream');
      return reply.send(Readable.from(stream));
    },
  );
}

/**
 * One page of a recursive listing (issue #16): a keyset read after `after`, so a listing of a
 * million entries costs the proxy's loop one page at a time and nobody holds it whole. The
 * first page reads the seq before its rows (as the whole listing does), and every later page
 * answers the seq it is given: a change landing between two pages is in the feed after that
 * seq — a path created behind the keyset arrives from the feed, one deleted ahead of it is
 * not listed and its delete replays harmlessly.
 */
async function listPage(store: HybridStore, userId: string, q: ListQuery): Promise<ListResponse> {
  if (!(q.recursive === '1' || q.recursive === 'true'))
    throw new ApiError('BAD_REQUEST', 'only a recursive listing is paged');
  const limit = q.limit ?? 1;
  let seq = q.seq;
  if (seq === undefined) {
    if (q.after !== undefined) throw new ApiError('BAD_REQUEST', "a later page needs the first page's `seq`");
    seq = await store.meta.currentSeq(userId);
  } else if (seq > (await store.meta.currentSeq(userId))) {
    throw new ApiError('BAD_REQUEST', '`seq` is ahead of the namespace');
  }
  if (q.after === undefined && q.path !== '') {
    // The folder is checked on the first page only: later pages of a folder removed meanwhile
    // are empty, and the feed after `seq` says it went.
    const d = await store.stat(userId, q.path);
    if (!d) throw new ApiError('NOT_FOUND', 'not found');
    if (d.kind !== 'dir') throw new ApiError('NOT_A_FOLDER', 'not a folder');
  }
  const rows = await store.meta.listEntriesPage(userId, q.path, q.after ?? '', limit);
  const last = rows.at(-1);
  return {
    entries: rows.map(publicEntry),
    seq,
    ...(rows.length === limit && last ? { next: last.path } : {}),
  };
}

/** One `bytes=` range; undefined for none; RANGE_NOT_SATISFIABLE when it cannot be served. */
export function parseRange(
  header: string | undefined,
  size: number,
): { start: number; end: number } | undefined {
  if (!header) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === ''))
    throw new ApiError('RANGE_NOT_SATISFIABLE', 'only one bytes=a-b range is supported', { size });
  let start: number;
  let end: number;
  if (m[1] === '') {
    const n = Number(m[2]);
    start = Math.max(0, size - n);
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  }
  if (!Number.isSafeInteger(start) || start >= size || end < start) {
    throw new ApiError('RANGE_NOT_SATISFIABLE', `range not satisfiable for ${size} bytes`, { size });
  }
  return { start, end };
}

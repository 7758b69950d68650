/**
 * The Dropbox emulator's upload routes: files/upload, upload sessions (start, append_v2 with
 * `incorrect_offset` answers, finish), finish_batch_v2 (one batch per account at a time:
 * overlapping batches fail with too_many_write_operations), and files/download and
 * get_metadata.
 */
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { HttpError, sendContent, type Exchange } from '../http.ts';
import { DropboxContentHasher } from '../hashes.ts';
import { type TreeNode } from '../tree.ts';
import {
  Path,
  CommitInfo,
  Cursor,
  FinishArg,
  type Session,
  routeError,
  lookupError,
  badRequest,
  headerSafeJson,
} from './protocol.ts';
import { DropboxModel } from './model.ts';

export abstract class DropboxUploads extends DropboxModel {
  protected readonly sessions = new Map<string, Session>();
  private batchInFlight = 0;
  maxBatchesInFlight = 0;

  /** Upload sessions started but never finished. */
  openSessions(): number {
    let n = 0;
    for (const s of this.sessions.values()) if (!s.finished) n++;
    return n;
  }

  override stats(): Record<string, number> {
    return { openSessions: this.openSessions(), maxBatchesInFlight: this.maxBatchesInFlight };
  }

  protected upload(arg: unknown, data: Buffer): unknown {
    const commit = this.parse(CommitInfo, arg, 'files/upload');
    if (data.byteLength > 150 * 1024 * 1024) {
      throw routeError(['payload_too_large'], { '.tag': 'payload_too_large' });
    }
    const node = this.commit(commit, data, 'files/upload', ({ tags, error }) =>
      tags[0] === 'content_hash_mismatch'
        ? routeError(tags, error)
        : routeError(['path', ...tags], { '.tag': 'path', reason: error, upload_session_id: '' }),
    );
    return this.metadata(node);
  }

  protected sessionStart(arg: unknown, data: Buffer): unknown {
    const a = this.parse(
      z.object({
        close: z.boolean().default(false),
        session_type: z.unknown().optional(),
        content_hash: z.string().optional(),
      }),
      arg ?? {},
      'files/upload_session/start',
    );
    if (
      a.content_hash !== undefined &&
      new DropboxContentHasher().update(data).digestHex() !== a.content_hash
    ) {
      throw routeError(['content_hash_mismatch'], { '.tag': 'content_hash_mismatch' });
    }
    const id = 'pid_upload_session:' + randomBytes(18).toString('base64url');
    this.sessions.set(id, { id, chunks: [data], offset: data.byteLength, closed: a.close, finished: false });
    return { session_id: id };
  }

  protected session(
    cursor: z.infer<typeof Cursor>,
    wrap: (tag: Record<string, unknown>, tags: string[]) => HttpError,
  ): Session {
    const s = this.sessions.get(cursor.session_id);
    if (!s) throw wrap({ '.tag': 'not_found' }, ['not_found']);
    if (s.finished) throw wrap({ '.tag': 'not_found' }, ['not_found']);
    if (cursor.offset !== s.offset) {
      throw wrap({ '.tag': 'incorrect_offset', correct_offset: s.offset }, ['incorrect_offset']);
    }
    return s;
  }

  protected sessionAppend(arg: unknown, data: Buffer): unknown {
    const a = this.parse(
      z.object({ cursor: Cursor, close: z.boolean().default(false), content_hash: z.string().optional() }),
      arg,
      'files/upload_session/append_v2',
    );
    const s = this.session(a.cursor, (error, tags) => routeError(tags, error));
    if (s.closed) throw routeError(['closed'], { '.tag': 'closed' });
    if (
      a.content_hash !== undefined &&
      new DropboxContentHasher().update(data).digestHex() !== a.content_hash
    ) {
      throw routeError(['content_hash_mismatch'], { '.tag': 'content_hash_mismatch' });
    }
    s.chunks.push(data);
    s.offset += data.byteLength;
    s.closed = a.close;
    return null;
  }

  protected finishOne(a: z.infer<typeof FinishArg>, data: Buffer, endpoint: string): TreeNode {
    const s = this.session(a.cursor, (error, tags) =>
      routeError(['lookup_failed', ...tags], { '.tag': 'lookup_failed', lookup_failed: error }),
    );
    if (s.closed && data.byteLength > 0) {
      throw routeError(['lookup_failed', 'closed'], {
        '.tag': 'lookup_failed',
        lookup_failed: { '.tag': 'closed' },
      });
    }
    const all = Buffer.concat([...s.chunks, data]);
    const commit = { ...a.commit, content_hash: a.content_hash ?? a.commit.content_hash };
    const node = this.commit(commit, all, endpoint, ({ tags, error }) =>
      tags[0] === 'content_hash_mismatch'
        ? routeError(tags, error)
        : routeError(['path', ...tags], { '.tag': 'path', path: error }),
    );
    s.finished = true;
    this.sessions.delete(s.id);
    return node;
  }

  protected sessionFinish(arg: unknown, data: Buffer): unknown {
    const a = this.parse(FinishArg, arg, 'files/upload_session/finish');
    return this.metadata(this.finishOne(a, data, 'files/upload_session/finish'));
  }

  protected finishBatch(arg: unknown): { entries: unknown[] } {
    const a = this.parse(
      z.object({ entries: z.array(FinishArg).max(1000) }),
      arg,
      'files/upload_session/finish_batch_v2',
    );
    this.batchInFlight += 1;
    this.maxBatchesInFlight = Math.max(this.maxBatchesInFlight, this.batchInFlight);
    try {
      const entries = a.entries.map((e) => {
        const s = this.sessions.get(e.cursor.session_id);
        if (s && !s.closed) {
          return {
            '.tag': 'failure',
            failure: { '.tag': 'lookup_failed', lookup_failed: { '.tag': 'not_closed' } },
          };
        }
        try {
          // FileMetadata's fields inline in the union member, tagged 'success'.
          const meta = this.metadata(
            this.finishOne(e, Buffer.alloc(0), 'files/upload_session/finish_batch_v2'),
          );
          return { ...meta, '.tag': 'success' };
        } catch (err) {
          if (err instanceof HttpError && err.status === 409) {
            return { '.tag': 'failure', failure: (err.body as { error: unknown }).error };
          }
          throw err;
        }
      });
      return { entries };
    } finally {
      this.batchInFlight -= 1;
    }
  }

  protected async download(arg: unknown, x: Exchange): Promise<void> {
    const a = this.parse(z.object({ path: Path, rev: z.string().optional() }), arg, 'files/download');
    const node = this.lookup(a.rev ? `rev:${a.rev}` : a.path, 'files/download');
    if (!node) throw lookupError('path', 'not_found');
    if (node.kind !== 'file') throw lookupError('path', 'not_file');
    await sendContent(x, node.content, {
      'content-type': 'application/octet-stream',
      'dropbox-api-result': headerSafeJson(this.metadata(node)),
      etag: `W/"${node.meta.rev}"`,
    });
  }

  protected getMetadata(arg: unknown): unknown {
    const a = this.parse(z.object({ path: Path }).passthrough(), arg, 'files/get_metadata');
    if (a.path === '')
      throw badRequest('files/get_metadata', 'request body: path: The root folder is unsupported.');
    const node = this.lookup(a.path, 'files/get_metadata');
    if (!node) throw lookupError('path', 'not_found');
    return this.metadata(node);
  }
}

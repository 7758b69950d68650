/**
 * The Drive emulator's protocol pieces, free of server state: Drive's error bodies, the
 * `fields` partial-response grammar, the `q` search grammar, the metadata bodies files.create
 * and files.update (v3 and v2) accept, and the resumable session record.
 */
import { z } from 'zod';
import { type EmulatorOptions, HttpError } from '../http.ts';

export const FOLDER_MIME = 'application/vnd.google-apps.folder';
export const CHUNK_GRANULARITY = 256 * 1024;
export const ROOT_ID = '0AEmulatorRootFolderPVA';

export type GDriveEmulatorOptions = EmulatorOptions;

export function driveError(
  code: number,
  message: string,
  reason: string,
  domain = 'global',
  extra: Record<string, string> = {},
  headers: Record<string, string> = {},
): HttpError {
  return new HttpError(
    code,
    { error: { code, message, errors: [{ message, domain, reason, ...extra }] } },
    headers,
  );
}

export const notFound = (id: string): HttpError =>
  driveError(404, `File not found: ${id}.`, 'notFound', 'global', {
    locationType: 'parameter',
    location: 'fileId',
  });
/** What Drive answers when an If-Match precondition does not hold. */
export const preconditionFailed = (): HttpError =>
  driveError(412, 'Precondition Failed', 'conditionNotMet', 'global', {
    locationType: 'header',
    location: 'If-Match',
  });
export const invalid = (message: string, location?: string): HttpError =>
  driveError(
    400,
    message,
    location ? 'invalid' : 'badRequest',
    'global',
    location ? { locationType: 'parameter', location } : {},
  );

// ---- `fields` partial responses ----

export type FieldTree = Map<string, FieldTree | true>;

/** Parse a partial-response selector: `a,b(c,d),e/f`. */
export function parseFields(spec: string): FieldTree {
  let i = 0;
  const parseList = (): FieldTree => {
    const out: FieldTree = new Map();
    for (;;) {
      let name = '';
      while (i < spec.length && !',()'.includes(spec[i] as string)) name += spec[i++];
      name = name.trim();
      let sub: FieldTree | true = true;
      if (spec[i] === '(') {
        i++;
        sub = parseList();
        if (spec[i] !== ')') throw invalid('Invalid field selection', 'fields');
        i++;
      }
      if (name !== '') {
        const parts = name.split('/');
        let node = out;
        parts.forEach((part, idx) => {
          if (idx === parts.length - 1) {
            node.set(part, sub);
          } else {
            let next = node.get(part);
            if (next === undefined || next === true) {
              next = new Map();
              node.set(part, next);
            }
            node = next;
          }
        });
      }
      if (spec[i] === ',') {
        i++;
        continue;
      }
      return out;
    }
  };
  const tree = parseList();
  if (i !== spec.length) throw invalid('Invalid field selection', 'fields');
  return tree;
}

export function applyFields(value: unknown, fields: FieldTree | true): unknown {
  if (fields === true || fields.has('*')) return value;
  if (Array.isArray(value)) return value.map((v) => applyFields(v, fields));
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [k, sub] of fields) {
    const v = (value as Record<string, unknown>)[k];
    if (v !== undefined) out[k] = applyFields(v, sub);
  }
  return out;
}

// ---- `q` ----

export type Term =
  | { kind: 'parent'; id: string }
  | { kind: 'name'; op: '=' | '!=' | 'contains'; value: string }
  | { kind: 'trashed'; value: boolean }
  | { kind: 'mimeType'; op: '=' | '!='; value: string };

export function parseQuery(q: string): Term[] {
  const terms: Term[] = [];
  const str = String.raw`'((?:[^'\\]|\\.)*)'`;
  const unescape = (s: string): string => s.replace(/\\(.)/g, '$1');
  // Split on `and` outside quoted strings.
  const parts: string[] = [];
  let cur = '';
  for (let i = 0; i < q.length; i++) {
    const ch = q[i] as string;
    if (ch === "'") {
      let j = i + 1;
      while (j < q.length && q[j] !== "'") j += q[j] === '\\' ? 2 : 1;
      cur += q.slice(i, j + 1);
      i = j;
      continue;
    }
    const m = /^\s+and\s+/i.exec(q.slice(i));
    if (m) {
      parts.push(cur);
      cur = '';
      i += m[0].length - 1;
      continue;
    }
    cur += ch;
  }
  if (cur.trim() !== '') parts.push(cur);
  for (const raw of parts) {
    const t = raw.trim();
    let m: RegExpExecArray | null;
    if ((m = new RegExp(`^${str}\\s+in\\s+parents$`).exec(t)))
      terms.push({ kind: 'parent', id: unescape(m[1] as string) });
    else if ((m = new RegExp(`^name\\s*(=|!=|contains)\\s*${str}$`).exec(t))) {
      terms.push({ kind: 'name', op: m[1] as '=' | '!=' | 'contains', value: unescape(m[2] as string) });
    } else if ((m = /^trashed\s*=\s*(true|false)$/.exec(t)))
      terms.push({ kind: 'trashed', value: m[1] === 'true' });
    else if ((m = new RegExp(`^mimeType\\s*(=|!=)\\s*${str}$`).exec(t))) {
      terms.push({ kind: 'mimeType', op: m[1] as '=' | '!=', value: unescape(m[2] as string) });
    } else throw invalid('Invalid Value', 'q');
  }
  return terms;
}

export const MetadataBody = z
  .object({
    name: z.string().optional(),
    mimeType: z.string().optional(),
    parents: z.array(z.string()).optional(),
    modifiedTime: z.string().optional(),
    description: z.string().optional(),
    trashed: z.boolean().optional(),
    appProperties: z.record(z.string()).optional(),
  })
  .passthrough();
export type MetadataBody = z.infer<typeof MetadataBody>;

/** A v2 File in a files.update body: the fields the emulator applies. */
export const MetadataBodyV2 = z
  .object({
    title: z.string().optional(),
    mimeType: z.string().optional(),
    description: z.string().optional(),
    modifiedDate: z.string().optional(),
    labels: z.object({ trashed: z.boolean().optional() }).passthrough().optional(),
    parents: z.array(z.object({ id: z.string() }).passthrough()).optional(),
  })
  .passthrough();

export interface ResumableSession {
  id: string;
  /** The API that opened it: the final answer is a file of that version. */
  api: 'v2' | 'v3';
  /** If-Match of the initiating request, checked again when the content commits. */
  ifMatch?: string;
  /** Existing file for an update; undefined for a create. */
  fileId?: string;
  metadata: MetadataBody;
  chunks: Buffer[];
  received: number;
  total?: number;
  addParents?: string;
  removeParents?: string;
  /** `fields` of the initiating request, applied to the final response. */
  fields?: string;
}

/**
 * Hand-written checks of the two answers a client receives once per file: a bundle upload's
 * results (POST /v1/bundles) and the feed's change records (issue #16: validating them with
 * zod cost ~4–5 µs per file each, a few per cent of the agent's CPU per uploaded file).
 *
 * Each check accepts only the common shapes — an applied result, an upsert, delete or move
 * record — and only when they hold no key the schema does not know; it then returns the
 * value itself, exactly what the zod schema would have returned (zod drops unknown keys,
 * hence the exact-keys rule). Everything else (a conflict, an error, an unknown key, any
 * value the check refuses) goes to the zod schema, which returns it or throws its own
 * error: a malformed answer is refused with the same message as before. So what a check
 * accepts is a subset of what its schema accepts, never more (test/fast-check.test.ts).
 */
import { normalizeEntryPath } from '@weft/providers/paths';
import {
  type BundleUploadResponse as BundleUploadResponseT,
  BundleUploadResponse,
  FeedServerMessage,
} from './api.ts';

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Every own key of `o` is one of `keys`, and `o` has every one of `required`. */
function keysWithin(o: Obj, keys: ReadonlySet<string>, required: readonly string[]): boolean {
  for (const k in o) if (!keys.has(k) || !Object.hasOwn(o, k)) return false;
  for (const k of required) if (!Object.hasOwn(o, k)) return false;
  return true;
}

const count = (v: unknown): boolean => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

/**
 * The last path found canonical: a record names its path twice (its own and its entry's),
 * checked once (strings are values: the same string is as canonical as before).
 */
let lastCanonical = '';

/** EntryPath: at most 4096 characters, canonical (normalizeEntryPath leaves it as it is). */
function entryPath(v: unknown): boolean {
  if (typeof v !== 'string' || v.length > 4096) return false;
  if (v === lastCanonical && v !== '') return true;
  try {
    if (normalizeEntryPath(v) !== v) return false;
  } catch {
    return false;
  }
  lastCanonical = v;
  return true;
}

const SHA256 = /^[0-9a-f]{64}$/;
const REVISION = /^[\x21-\x7e]{1,255}$/;
const ENTRY_KEYS = new Set(['path', 'kind', 'size', 'mtimeMs', 'revision', 'sha256', 'tier']);
const ENTRY_REQUIRED = ['path', 'kind', 'size', 'mtimeMs', 'revision'];

/** EntryInfo. */
function entryInfo(v: unknown): boolean {
  return (
    isObj(v) &&
    keysWithin(v, ENTRY_KEYS, ENTRY_REQUIRED) &&
    entryPath(v.path) &&
    (v.kind === 'file' || v.kind === 'dir') &&
    count(v.size) &&
    count(v.mtimeMs) &&
    typeof v.revision === 'string' &&
    REVISION.test(v.revision) &&
    (v.sha256 === undefined || (typeof v.sha256 === 'string' && SHA256.test(v.sha256))) &&
    (v.tier === undefined || v.tier === 'small' || v.tier === 'large')
  );
}

const APPLIED_KEYS = new Set(['status', 'entry', 'seq']);
const RESULT_KEYS = new Set(['path', 'result']);

/** An applied OpResult inside a bundle result `{ path, result }`. */
function appliedResult(v: unknown): boolean {
  if (!isObj(v) || !keysWithin(v, RESULT_KEYS, ['path', 'result']) || !entryPath(v.path)) return false;
  const r = v.result;
  return (
    isObj(r) &&
    r.status === 'applied' &&
    keysWithin(r, APPLIED_KEYS, ['status', 'seq']) &&
    count(r.seq) &&
    (r.entry === undefined || entryInfo(r.entry))
  );
}

/** How many answers each check took by hand, and how many it left to zod (tests count them). */
export const fastChecks = { byHand: 0, byZod: 0 };

/**
 * BundleUploadResponse's `parse`: by hand when every result is applied (the common answer),
 * else by the zod schema (same value, same errors).
 */
export const BundleUploadResponseCheck = {
  parse(json: unknown): BundleUploadResponseT {
    if (isObj(json) && keysWithin(json, RESULTS_KEYS, ['results']) && Array.isArray(json.results)) {
      const results: unknown[] = json.results;
      let ok = true;
      for (const r of results)
        if (!appliedResult(r)) {
          ok = false;
          break;
        }
      if (ok) {
        fastChecks.byHand += 1;
        return json as BundleUploadResponseT;
      }
    }
    fastChecks.byZod += 1;
    return BundleUploadResponse.parse(json);
  },
};
const RESULTS_KEYS = new Set(['results']);

const DEVICE_KEYS = ['device', 'deviceName'] as const;
const RECORD_KEYS = {
  upsert: new Set(['seq', 'type', 'path', 'entry', ...DEVICE_KEYS]),
  delete: new Set(['seq', 'type', 'path', ...DEVICE_KEYS]),
  move: new Set(['seq', 'type', 'from', 'path', 'entry', ...DEVICE_KEYS]),
};
const RECORD_REQUIRED = {
  upsert: ['seq', 'type', 'path', 'entry'],
  delete: ['seq', 'type', 'path'],
  move: ['seq', 'type', 'from', 'path', 'entry'],
};

/** A ChangeRecord. */
function changeRecord(v: unknown): boolean {
  if (!isObj(v)) return false;
  const type = v.type;
  if (type !== 'upsert' && type !== 'delete' && type !== 'move') return false;
  return (
    keysWithin(v, RECORD_KEYS[type], RECORD_REQUIRED[type]) &&
    count(v.seq) &&
    (v.seq as number) > 0 &&
    entryPath(v.path) &&
    (type !== 'move' || entryPath(v.from)) &&
    (type === 'delete' || entryInfo(v.entry)) &&
    (v.device === undefined || typeof v.device === 'string') &&
    (v.deviceName === undefined || typeof v.deviceName === 'string')
  );
}

const CHANGES_KEYS = new Set(['type', 'changes', 'cursor']);

/**
 * FeedServerMessage's `parse`: a `changes` message by hand when every record is an upsert,
 * delete or move of the usual shape, anything else by the zod schema (same value, same errors).
 */
export const FeedServerMessageCheck = {
  parse(json: unknown): FeedServerMessage {
    if (
      isObj(json) &&
      json.type === 'changes' &&
      keysWithin(json, CHANGES_KEYS, ['type', 'changes', 'cursor']) &&
      count(json.cursor) &&
      Array.isArray(json.changes)
    ) {
      const changes: unknown[] = json.changes;
      let ok = true;
      for (const c of changes)
        if (!changeRecord(c)) {
          ok = false;
          break;
        }
      if (ok) {
        fastChecks.byHand += 1;
        return json as FeedServerMessage;
      }
    }
    fastChecks.byZod += 1;
    return FeedServerMessage.parse(json);
  },
};

import { describe, expect, it } from 'vitest';
import {
  AlreadyExistsError,
  InvalidPathError,
  NotFoundError,
  PreconditionFailedError,
  QuotaExceededError,
} from '@weft/providers/errors';
import { type OpResult, entryFromInfo, settleOpResult } from '../src/index.ts';

const entry = { path: 'a.txt', kind: 'file', size: 3, mtimeMs: 5, revision: 'r1', sha256: 'ab' } as const;

function settle(r: OpResult): unknown {
  try {
    return settleOpResult(r, 'a.txt', (code, message) => new Error(`other ${code} ${message}`));
  } catch (e) {
    return e;
  }
}

describe('Weft storage as a provider', () => {
  it('gives an API entry as a provider entry (hash only when known)', () => {
    expect(entryFromInfo(entry)).toEqual({
      path: 'a.txt',
      kind: 'file',
      size: 3,
      modifiedMs: 5,
      revision: 'r1',
      hash: { algorithm: 'sha256', value: 'ab' },
    });
    const { sha256: _sha256, ...withoutHash } = entry;
    expect(entryFromInfo({ ...withoutHash, kind: 'dir' })).not.toHaveProperty('hash');
  });

  it('gives each error code the contract names as its typed error, anything else as the caller makes it', () => {
    const err = (code: string): OpResult => ({ status: 'error', error: { code, message: 'm' } }) as OpResult;
    expect(settle(err('NOT_FOUND'))).toBeInstanceOf(NotFoundError);
    expect(settle(err('ALREADY_EXISTS'))).toBeInstanceOf(AlreadyExistsError);
    expect(settle(err('NOT_A_FOLDER'))).toBeInstanceOf(AlreadyExistsError);
    expect(settle(err('PRECONDITION_FAILED'))).toBeInstanceOf(PreconditionFailedError);
    expect(settle(err('INVALID_PATH'))).toBeInstanceOf(InvalidPathError);
    expect(settle(err('QUOTA_EXCEEDED'))).toBeInstanceOf(QuotaExceededError);
    expect(settle(err('INTERNAL'))).toEqual(new Error('other INTERNAL m'));
  });

  it('gives a conflict as PreconditionFailed and an applied op as its entry', () => {
    expect(settle({ status: 'applied', entry, seq: 1 })).toEqual(entry);
    const conflict = {
      status: 'conflict',
      seq: 2,
      conflict: { path: 'a.txt', copyPath: 'a (conflict).txt', serverRevision: 'r2' },
    } as unknown as OpResult;
    expect(settle(conflict)).toBeInstanceOf(PreconditionFailedError);
  });
});

// GF(2^8) arithmetic for the small matrices (the bulk work is in wasm).
// Polynomial x^8 + x^4 + x^3 + x^2 + 1 (0x11d), generator 2.

const EXP = new Uint8Array(512);
const LOG = new Uint8Array(256);
{
  let x = 1;
  for (let i = 0; i < 255; i++) {
    EXP[i] = x;
    EXP[i + 255] = x;
    LOG[x] = i;
    x <<= 1;
    if (x & 0x100) x ^= 0x11d;
  }
}

export function gfMul(a: number, b: number): number {
  if (a === 0 || b === 0) return 0;
  return EXP[(LOG[a] ?? 0) + (LOG[b] ?? 0)] ?? 0;
}

export function gfInv(a: number): number {
  if (a === 0) throw new RangeError('0 has no inverse in GF(2^8)');
  return EXP[255 - (LOG[a] ?? 0)] ?? 0;
}

/**
 * Parity rows of the systematic generator: a Cauchy matrix C[i][j] = 1 / (x_i + y_j) with
 * x_i = k + i and y_j = j. Every square submatrix of a Cauchy matrix is invertible, so
 * [I; C] is MDS: any k of its n rows are linearly independent.
 */
export function parityMatrix(n: number, k: number): Uint8Array[] {
  const rows: Uint8Array[] = [];
  for (let i = 0; i < n - k; i++) {
    const row = new Uint8Array(k);
    for (let j = 0; j < k; j++) row[j] = gfInv((k + i) ^ j);
    rows.push(row);
  }
  return rows;
}

/** Row i of the n × k generator matrix. */
export function generatorRow(parity: readonly Uint8Array[], k: number, i: number): Uint8Array {
  if (i < k) {
    const row = new Uint8Array(k);
    row[i] = 1;
    return row;
  }
  const row = parity[i - k];
  if (!row) throw new RangeError(`no generator row ${i}`);
  return row;
}

/** Inverts a square matrix by Gauss–Jordan elimination. */
export function invert(matrix: readonly Uint8Array[]): Uint8Array[] {
  const size = matrix.length;
  const a: Uint8Array[] = matrix.map((row) => Uint8Array.from(row));
  const inv: Uint8Array[] = matrix.map((_, i) => {
    const row = new Uint8Array(size);
    row[i] = 1;
    return row;
  });
  const at = (m: Uint8Array[], r: number): Uint8Array => m[r] ?? new Uint8Array(size);
  for (let col = 0; col < size; col++) {
    let pivot = col;
    while (pivot < size && at(a, pivot)[col] === 0) pivot++;
    if (pivot === size) throw new Error('singular decoding matrix: the generator is not MDS (bug)');
    if (pivot !== col) {
      [a[col], a[pivot]] = [at(a, pivot), at(a, col)];
      [inv[col], inv[pivot]] = [at(inv, pivot), at(inv, col)];
    }
    const scale = gfInv(at(a, col)[col] ?? 0);
    const rowA = at(a, col);
    const rowI = at(inv, col);
    for (let j = 0; j < size; j++) {
      rowA[j] = gfMul(rowA[j] ?? 0, scale);
      rowI[j] = gfMul(rowI[j] ?? 0, scale);
    }
    for (let r = 0; r < size; r++) {
      const factor = r === col ? 0 : (at(a, r)[col] ?? 0);
      if (factor === 0) continue;
      const targetA = at(a, r);
      const targetI = at(inv, r);
      for (let j = 0; j < size; j++) {
        targetA[j] = (targetA[j] ?? 0) ^ gfMul(factor, rowA[j] ?? 0);
        targetI[j] = (targetI[j] ?? 0) ^ gfMul(factor, rowI[j] ?? 0);
      }
    }
  }
  return inv;
}

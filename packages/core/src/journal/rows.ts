/**
 * Multi-row statements of the journal (issue #16): a VALUES list of many rows in one
 * statement, prepared once per row count.
 */
/** Rows per multi-row statement (Journal.runRows, activity.ts). */
export const ROWS_PER_STATEMENT = 64;

const valuesLists = new Map<string, string>();

/** `(?, ?), (?, ?), …`: `rows` groups of `width` placeholders (made once per shape). */
export function valuesList(rows: number, width: number): string {
  const key = `${rows}x${width}`;
  let v = valuesLists.get(key);
  if (v === undefined) {
    const one = `(${new Array<string>(width).fill('?').join(', ')})`;
    v = new Array<string>(rows).fill(one).join(', ');
    valuesLists.set(key, v);
  }
  return v;
}

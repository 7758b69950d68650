/**
 * Google Drive's change feed reports a moved folder as one item: its children are not
 * listed (their parent did not change). A folder moved there by another client (the
 * person, in Drive's web UI) must still reach the other replicas with its content — and
 * as a move, not as a delete of the content elsewhere.
 */
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GDriveEmulator } from '@weft/cloud-emulators/gdrive';
import { GDriveProvider, MemoryProvider, hasServerSideMove } from '@weft/providers';
import { MirrorEngine } from '../src/engine.ts';
import { migrate } from '../src/store.ts';
import { text, treeOf } from './helpers.ts';

describe('a folder moved on Drive by another client', () => {
  let gd: GDriveEmulator;
  beforeAll(async () => {
    gd = await new GDriveEmulator().start();
  });
  afterAll(async () => {
    await gd?.close();
  });

  it('reaches the other replicas with its content, as a move', async () => {
    const db = new Database(':memory:');
    migrate(db);
    const a = new MemoryProvider({ name: 'a' });
    const drive = () => new GDriveProvider({ token: gd.accessToken, rootUrl: gd.url });
    const person = drive();
    await a.write('team/notes/old/f1.txt', text('one'));
    await a.write('team/notes/f2.txt', text('two'));
    const engine = new MirrorEngine({
      shareId: 'd',
      db,
      replicas: [
        { id: 'a', member: 'ann', provider: a, root: 'team' },
        { id: 'b', member: 'ben', provider: drive(), root: 'share' },
      ],
    });
    await engine.quiesce();
    expect([...(await treeOf(person, 'share')).keys()]).toEqual([
      'notes',
      'notes/f2.txt',
      'notes/old',
      'notes/old/f1.txt',
    ]);
    if (!hasServerSideMove(person)) throw new Error('the Drive adapter moves');
    await person.move('share/notes', 'share/moved');
    await engine.quiesce();
    const ta = await treeOf(a, 'team');
    expect([...ta.keys()]).toEqual(['moved', 'moved/f2.txt', 'moved/old', 'moved/old/f1.txt']);
    expect([...(await treeOf(person, 'share'))]).toEqual([...ta]);
    expect(engine.stats.nativeMoves).toBe(1);
    db.close();
  });

  it('a file the engine writes into the folder just after the move still converges', async () => {
    const db = new Database(':memory:');
    migrate(db);
    const a = new MemoryProvider({ name: 'a' });
    const drive = () => new GDriveProvider({ token: gd.accessToken, rootUrl: gd.url });
    const person = drive();
    await a.write('t2/notes/old/f1.txt', text('one'));
    const engine = new MirrorEngine({
      shareId: 'd2',
      db,
      replicas: [
        { id: 'a', member: 'ann', provider: a, root: 't2' },
        { id: 'b', member: 'ben', provider: drive(), root: 's2' },
      ],
    });
    await engine.quiesce();
    if (!hasServerSideMove(person)) throw new Error('the Drive adapter moves');
    await person.move('s2/notes', 's2/moved');
    await a.write('t2/notes/old/f3.txt', text('three'));
    await a.write('t2/notes/old/f1.txt', text('one, edited'));
    await engine.quiesce();
    await engine.quiesce();
    const ta = await treeOf(a, 't2');
    expect([...(await treeOf(person, 's2'))]).toEqual([...ta]);
    db.close();
  });

  it('deletes and moves made while the engine was down reach the others after a restart with a new client', async () => {
    const db = new Database(':memory:');
    migrate(db);
    const a = new MemoryProvider({ name: 'a' });
    const drive = () => new GDriveProvider({ token: gd.accessToken, rootUrl: gd.url });
    const person = drive();
    await a.write('t3/notes/old/f1.txt', text('one'));
    await a.write('t3/notes/f2.txt', text('two'));
    await a.write('t3/gone.txt', text('bye'));
    // A new process: a new Drive client, whose id-to-path index starts empty.
    const make = () =>
      new MirrorEngine({
        shareId: 'd3',
        db,
        replicas: [
          { id: 'a', member: 'ann', provider: a, root: 't3' },
          { id: 'b', member: 'ben', provider: drive(), root: 's3', relistOnStart: true },
        ],
      });
    await make().quiesce();
    if (!hasServerSideMove(person)) throw new Error('the Drive adapter moves');
    await person.remove('s3/gone.txt');
    await person.move('s3/notes/old', 's3/older');
    const engine = make();
    await engine.quiesce();
    const ta = await treeOf(a, 't3');
    expect([...ta.keys()]).toEqual(['notes', 'notes/f2.txt', 'older', 'older/f1.txt']);
    expect([...(await treeOf(person, 's3'))]).toEqual([...ta]);
    // After the restart, the feed maps later deletes again.
    await person.remove('s3/notes/f2.txt');
    await engine.quiesce();
    expect([...(await treeOf(a, 't3')).keys()]).toEqual(['notes', 'older', 'older/f1.txt']);
    db.close();
  });
});

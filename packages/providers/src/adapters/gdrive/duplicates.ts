/**
 * Settling duplicate names. Drive lets several items in one folder share a name and cannot
 * refuse a create on a taken name: the oldest item (createdTime, then id) owns the path,
 * and an item the adapter just created that is not the oldest lost a race and is removed.
 */
import { NotFoundError, TransientError } from '../../errors.ts';
import { type DriveApi, type DriveFile, FOLDER_MIME, owner } from './api.ts';

/**
 * After a create Drive could not refuse (it allows a taken name): the oldest item of the
 * name owns the path. When that is not ours, another client's create landed between our
 * check and our create, and won: ours is deleted permanently (not trashed, so it cannot
 * come back) and the winner is returned; undefined when ours owns the path. The other
 * client, deciding on the same rule, keeps its item. A folder of ours that someone wrote
 * into before we settled (by its id) is first emptied into the winner. Runs to the end
 * even when the caller aborts, so that no losing item is left behind.
 */
export async function settleCreate(
  api: DriveApi,
  parentId: string,
  name: string,
  id: string,
  folder: boolean,
): Promise<DriveFile | undefined> {
  const winner = owner(await api.children(parentId, name));
  if (!winner?.id || winner.id === id) return undefined;
  if (folder && winner.mimeType === FOLDER_MIME) {
    // Someone wrote into ours before we settled (by its id): left there, it would be
    // hidden behind the older folder. What it holds moves into the winner first.
    await mergeFolder(api, id, winner.id);
    if ((await api.children(id, undefined)).length > 0) return winner; // could not move all
  } else if (folder && (await api.children(id, undefined)).length > 0) return winner;
  for (let attempt = 1; ; attempt++) {
    try {
      await api.delete(id, 'files.delete (lost create race)');
      return winner;
    } catch (e) {
      if (e instanceof NotFoundError) return winner;
      if (attempt >= 3 || !(e instanceof TransientError)) throw e;
      await new Promise((r) => setTimeout(r, 200 * attempt));
    }
  }
}

/**
 * Move what folder `from` holds into folder `to` (server-side, by id): a name `to` has
 * already is merged when both are folders, else moved under a free name "name (2).ext".
 */
async function mergeFolder(api: DriveApi, from: string, to: string): Promise<void> {
  for (const c of await api.children(from, undefined)) {
    if (!c.id || !c.name) continue;
    const clash = owner(await api.children(to, c.name));
    let name = c.name;
    if (clash?.id) {
      if (clash.mimeType === FOLDER_MIME && c.mimeType === FOLDER_MIME) {
        await mergeFolder(api, c.id, clash.id);
        if ((await api.children(c.id, undefined)).length === 0)
          await api.delete(c.id, 'files.delete (merged folder)');
        continue;
      }
      const dot = c.name.lastIndexOf('.');
      const [stem, ext] = dot > 0 ? [c.name.slice(0, dot), c.name.slice(dot)] : [c.name, ''];
      for (let n = 2; ; n++) {
        name = `${stem} (${n})${ext}`;
        if ((await api.children(to, name)).length === 0) break;
      }
    }
    const fileId = c.id;
    const o = await api.opts();
    await api.call('files.update (merge into the older folder)', () =>
      api.drive.files.update(
        {
          fileId,
          addParents: to,
          removeParents: from,
          requestBody: name === c.name ? {} : { name },
          fields: 'id',
        },
        o,
      ),
    );
  }
}

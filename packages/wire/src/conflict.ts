/** Names for conflicted copies, the same on client and server. */
import { baseName, parentPath } from '@weft/providers/paths';

function pad(n: number, width = 2): string {
  return String(n).padStart(width, '0');
}

/**
 * `dir/name (conflicted copy YYYY-MM-DD HHMMSS from DEVICE).ext` — the extension is the
 * part after the last dot of the name (none for dotfiles like `.bashrc`). UTC time.
 * Characters a path segment cannot hold are removed from the device name.
 */
export function conflictedCopyPath(path: string, when: Date, device: string): string {
  const name = baseName(path);
  const dot = name.lastIndexOf('.');
  const stem = dot > 0 ? name.slice(0, dot) : name;
  const ext = dot > 0 ? name.slice(dot) : '';
  const stamp =
    `${when.getUTCFullYear()}-${pad(when.getUTCMonth() + 1)}-${pad(when.getUTCDate())} ` +
    `${pad(when.getUTCHours())}${pad(when.getUTCMinutes())}${pad(when.getUTCSeconds())}`;
  // eslint-disable-next-line no-control-regex
  const dev = device.replace(/[/\\\x00-\x1f]/g, '').slice(0, 64) || 'unknown device';
  const copy = `${stem} (conflicted copy ${stamp} from ${dev})${ext}`;
  const parent = parentPath(path);
  return parent === '' ? copy : `${parent}/${copy}`;
}

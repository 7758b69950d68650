/**
 * Everything a proxy stores is its users' data: folders it creates are 0700 and files 0600,
 * whatever the process umask (a standalone server under umask 022 would otherwise leave the
 * namespaces, the SQLite index and staged uploads readable by every local user).
 */
export { privateDatabaseFile, privateDirSync as privateDir } from '@weft/providers/private-files';

/**
 * The agent's state folder (journal, tokens, copies of deleted files) and its secret files
 * are this user's only (0700 / 0600) whatever the umask.
 */
export { privateDatabaseFile, privateDir, writePrivateFile } from '@weft/providers/private-files';

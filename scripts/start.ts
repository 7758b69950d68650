/**
 * `npm start`: run Weft on its embedded defaults — no configuration, no accounts.
 * Data lives in $WEFT_HOME (default ~/.weft); the synced folder is $WEFT_HOME/../Weft
 * (default ~/Weft). Each part starts here as its package lands.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { FsProvider } from '@weft/providers';

const home = process.env.WEFT_HOME ?? nodePath.join(os.homedir(), '.weft');
const folder = process.env.WEFT_FOLDER ?? nodePath.join(nodePath.dirname(home), 'Weft');

await fsp.mkdir(home, { recursive: true });
await fsp.mkdir(folder, { recursive: true });
const store = await FsProvider.open({ root: nodePath.join(home, 'store') });
let files = 0;
for await (const e of store.list('', { recursive: true })) if (e.kind === 'file') files += 1;
console.log(`Weft data: ${home} (embedded store: ${files} files)`);
console.log(`Weft folder: ${folder}`);
console.log('The proxy server and the sync agent are not built yet (see the open issues); nothing to run.');
await store.close();

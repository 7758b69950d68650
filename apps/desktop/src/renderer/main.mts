/** The renderer entry: one client (IPC or HTTP), a header with the live state, five screens. */
import type { FolderStatusDto } from '../common/api.ts';
import { DISPLAY_LABEL, displayState, isNotEnrolled } from '../common/format.ts';
import { Scope, h } from './dom.mts';
import { accountsScreen } from './screens/accounts.mts';
import { costScreen } from './screens/cost.mts';
import { foldersSection } from './screens/folders.mts';
import { historyScreen } from './screens/history.mts';
import { settingsScreen } from './screens/settings.mts';
import { selectiveSyncSection } from './screens/selective-sync.mts';
import { sharingScreen } from './screens/sharing.mts';
import { statusScreen } from './screens/status.mts';
import { storageHealthScreen } from './screens/storage-health.mts';
import { connect } from './transport.mts';

const SCREENS = ['status', 'accounts', 'cost', 'storage', 'sharing', 'settings', 'history'] as const;
type Screen = (typeof SCREENS)[number];
const TITLES: Record<Screen, string> = {
  status: 'Status',
  history: 'History',
  cost: 'Cost',
  storage: 'Storage health',
  accounts: 'Accounts',
  sharing: 'Sharing',
  settings: 'Settings',
};

function start(): void {
  const api = connect();
  const main = document.getElementById('main') as HTMLElement;
  const headline = document.getElementById('headline') as HTMLElement;
  const errors = document.getElementById('errors') as HTMLElement;
  const nav = document.getElementById('nav') as HTMLElement;
  const report = (message: string): void => {
    errors.replaceChildren(
      h(
        'p',
        {},
        message,
        ' ',
        h('button', { type: 'button', onclick: () => errors.replaceChildren() }, 'Dismiss'),
      ),
    );
  };
  let scope = new Scope();
  let onStatus: ((s: FolderStatusDto) => void) | undefined;
  let last: FolderStatusDto | undefined;

  nav.replaceChildren(...SCREENS.map((s) => h('a', { href: `#${s}`, id: `nav-${s}` }, TITLES[s])));

  const show = (): void => {
    // '#history?path=…' carries its own parameters (screens/history.mts).
    const wanted = location.hash.slice(1).split('?')[0] ?? '';
    const screen: Screen = (SCREENS as readonly string[]).includes(wanted) ? (wanted as Screen) : 'status';
    scope.dispose();
    scope = new Scope();
    onStatus = undefined;
    errors.replaceChildren();
    for (const s of SCREENS) {
      const link = document.getElementById(`nav-${s}`);
      if (s === screen) link?.setAttribute('aria-current', 'page');
      else link?.removeAttribute('aria-current');
    }
    document.title = `Weft — ${TITLES[screen]}`;
    if (screen === 'status') {
      onStatus = statusScreen(main, api, scope, report);
      if (last) onStatus(last);
    } else if (screen === 'cost') costScreen(main, api, scope, report);
    else if (screen === 'history') historyScreen(main, api, scope, report);
    else if (screen === 'storage') storageHealthScreen(main, api, scope, report);
    else if (screen === 'accounts') accountsScreen(main, api, scope, report);
    else if (screen === 'sharing') sharingScreen(main, api, scope, report);
    else {
      settingsScreen(main, api, scope, report);
      foldersSection(main, api, scope, report);
      selectiveSyncSection(main, api, scope, report);
    }
    main.dataset.screen = screen;
  };

  const received = (s: FolderStatusDto): void => {
    last = s;
    const d = displayState(s);
    headline.className = `headline state-${d}`;
    headline.textContent = isNotEnrolled(s.error) ? 'Not connected' : DISPLAY_LABEL[d];
    document.body.dataset.state = d;
    onStatus?.(s);
  };
  api.onStatus(received);
  api.getStatus({}).then(received, (e: unknown) => report(e instanceof Error ? e.message : String(e)));
  window.addEventListener('hashchange', show);
  show();
}

start();

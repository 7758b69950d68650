/**
 * The tray popover page (tray.html): the Electron tray's popover window loads it, and a
 * browser can open it beside the full window (`/tray.html`, linked from its header).
 */
import type { FolderStatusDto, WeftClient } from '../common/api.ts';
import { Scope, h } from './dom.mts';
import { type TrayHost, trayPopoverView } from './screens/tray-popover.mts';
import { connect } from './transport.mts';

/** What the desktop app's preload adds for the popover (see ../preload/bridge.ts). */
interface TrayBridge {
  trayAction(action: 'openFolder' | 'openStatus'): Promise<unknown>;
}

function host(api: WeftClient): TrayHost {
  const bridge = (window as { weft?: Partial<TrayBridge> }).weft;
  const trayAction = bridge?.trayAction;
  if (trayAction)
    return {
      openFolder: async () => {
        await trayAction('openFolder');
        return true;
      },
      openWindow: () => void trayAction('openStatus'),
    };
  // A browser: the full window in its own tab (reused when open); the agent opens the folder
  // on the computer it runs on (false where there is no desktop to open it on).
  return {
    openFolder: async () => (await api.openFolder({})).opened,
    openWindow: () => void window.open(new URL('./#status', location.href).href, 'weft-window'),
  };
}

function start(): void {
  const api = connect();
  const root = document.getElementById('tray') as HTMLElement;
  const errors = h('div', { id: 'errors', role: 'alert' });
  root.before(errors);
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
  const draw = trayPopoverView(root, api, host(api), new Scope(), report);
  const received = (s: FolderStatusDto): void => {
    document.body.dataset.state = s.state;
    draw(s);
  };
  api.onStatus(received);
  api.getStatus({}).then(received, (e: unknown) => report(e instanceof Error ? e.message : String(e)));
}

start();

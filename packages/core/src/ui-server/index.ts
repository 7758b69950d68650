export {
  MAX_LOGIN_TTL_MS,
  createUiHttpHandler,
  isLoopbackHost,
  sameSecret,
  type UiHttpHandler,
  type UiHttpOptions,
} from './http.ts';
export { LAUNCHER_FILE, openLoginInBrowser, systemOpen } from './browser-open.ts';
export {
  copyIsMine,
  createUiService,
  loadSettings,
  notEnrolledStatus,
  toShare,
  toStatusDto,
  type EnrolRequest,
  type UiService,
  type UiServiceOptions,
  type UiSession,
} from './service.ts';
export { SHARE_ROUTES, ShareApiError, httpShareBackend, type ShareBackend } from './share-client.ts';

export { createUiHttpHandler, isLoopbackHost, type UiHttpHandler, type UiHttpOptions } from './http.ts';
export {
  copyIsMine,
  createUiService,
  loadSettings,
  toStatusDto,
  type UiService,
  type UiServiceOptions,
} from './service.ts';

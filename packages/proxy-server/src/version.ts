/** The proxy's version, as /healthz and the OpenAPI document report it. */
export const SERVER_VERSION = '0.1.0';

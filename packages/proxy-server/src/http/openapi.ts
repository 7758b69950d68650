/** The OpenAPI 3.1 document (GET /openapi.json), generated from the routes' descriptions. */
import { z } from 'zod/v4';
import { ApiErrorBody } from '@weft/wire';
import { SERVER_VERSION } from '../version.ts';
import type { RouteDoc } from './route.ts';

export function openApi(docs: readonly RouteDoc[]): unknown {
  const paths: Record<string, Record<string, unknown>> = {};
  const schema = (s: z.ZodType): unknown => z.toJSONSchema(s, { unrepresentable: 'any', io: 'input' });
  for (const d of docs) {
    const url = d.url.replace(/:(\w+)/g, '{$1}');
    const op: Record<string, unknown> = {
      summary: d.summary,
      ...(d.websocket ? { description: 'WebSocket upgrade (GET with Upgrade: websocket).' } : {}),
      security: d.auth === 'device' ? [{ device: [] }] : d.auth === 'admin' ? [{ admin: [] }] : [],
      responses: {
        '200': d.binaryResponse
          ? {
              description: d.responseDescription ?? 'OK',
              content: { [d.binaryResponse]: { schema: { type: 'string', format: 'binary' } } },
            }
          : {
              description: 'OK',
              ...(d.response ? { content: { 'application/json': { schema: schema(d.response) } } } : {}),
            },
        default: { description: 'Error', content: { 'application/json': { schema: schema(ApiErrorBody) } } },
      },
    };
    const params: unknown[] = [];
    for (const m of d.url.matchAll(/:(\w+)/g))
      params.push({ name: m[1], in: 'path', required: true, schema: { type: 'string' } });
    if (d.query) {
      const js = schema(d.query) as { properties?: Record<string, unknown>; required?: string[] };
      for (const [name, s] of Object.entries(js.properties ?? {})) {
        params.push({ name, in: 'query', required: js.required?.includes(name) ?? false, schema: s });
      }
    }
    if (params.length) op.parameters = params;
    if (d.body)
      op.requestBody = { required: true, content: { 'application/json': { schema: schema(d.body) } } };
    if (d.binaryBody)
      op.requestBody = {
        required: true,
        content: { [d.binaryBody]: { schema: { type: 'string', format: 'binary' } } },
      };
    paths[url] = { ...(paths[url] ?? {}), [d.method.toLowerCase()]: op };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Weft proxy API', version: SERVER_VERSION, description: 'See docs/formats/api.md' },
    components: {
      securitySchemes: {
        device: { type: 'http', scheme: 'bearer', description: 'Device token from POST /v1/enrol' },
        admin: { type: 'http', scheme: 'bearer', description: 'Admin token from the server configuration' },
      },
    },
    paths,
  };
}

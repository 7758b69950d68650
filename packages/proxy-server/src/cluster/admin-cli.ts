/**
 * `weft-proxy cluster drain|activate ID --server URL` (cli.ts): the operator's side of
 * POST /v1/admin/cluster/instances/{id}/drain and …/activate, sent to any instance of the
 * cluster (each can change any live instance's row). The admin token is read from
 * WEFT_PROXY_ADMIN_TOKEN (not an argument: arguments show in `ps`).
 */
import { parseArgs } from 'node:util';
import { ApiErrorBody, ClusterInstanceChange } from '@weft/wire';
import { ConfigError } from '../config.ts';

export const ADMIN_VERBS = ['drain', 'activate'] as const;
export type AdminVerb = (typeof ADMIN_VERBS)[number];

/** Run the verb; the line to print on success. Throws ConfigError with the reason otherwise. */
export async function clusterAdminCommand(
  verb: AdminVerb,
  argv: string[],
  env: NodeJS.ProcessEnv,
  fetchFn: typeof fetch = fetch,
): Promise<string> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { server: { type: 'string', short: 's' } },
    allowPositionals: true,
    strict: true,
  });
  const [id, ...extra] = positionals;
  if (!id || extra.length > 0) throw new ConfigError(`cluster ${verb}: give one instance id`);
  const server = values.server ?? env.WEFT_PROXY_URL;
  if (!server) throw new ConfigError(`cluster ${verb}: give --server URL (any instance of the cluster)`);
  let base: URL;
  try {
    base = new URL(server);
  } catch {
    throw new ConfigError(`cluster ${verb}: --server ${server} is not a URL`);
  }
  const token = env.WEFT_PROXY_ADMIN_TOKEN;
  if (!token) throw new ConfigError(`cluster ${verb}: set WEFT_PROXY_ADMIN_TOKEN to the admin token`);
  const url = new URL(
    `v1/admin/cluster/instances/${encodeURIComponent(id)}/${verb}`,
    base.href.replace(/\/?$/, '/'),
  );
  let res: Response;
  try {
    res = await fetchFn(url, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
  } catch (e) {
    throw new ConfigError(`cluster ${verb}: ${base.origin} did not answer: ${(e as Error).message}`);
  }
  const body: unknown = await res.json().catch(() => undefined);
  if (!res.ok) {
    const err = ApiErrorBody.safeParse(body);
    throw new ConfigError(
      `cluster ${verb} ${id}: ${res.status} ${err.success ? `${err.data.error.code}: ${err.data.error.message}` : res.statusText}`,
    );
  }
  const r = ClusterInstanceChange.parse(body);
  return r.changed
    ? `instance ${r.instance.id} (${r.instance.url}) is now ${r.instance.state}`
    : `instance ${r.instance.id} (${r.instance.url}) was already ${r.instance.state}`;
}

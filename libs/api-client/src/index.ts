import createClient, { Client, Middleware } from 'openapi-fetch';
import type { components, paths } from './schema';

export type { components, operations, paths } from './schema';

export type ApiClient = Client<paths>;
export type Mission = components['schemas']['Mission'];
export type HitItem = components['schemas']['HitItem'];
export type Problem = components['schemas']['Problem'];

export interface ApiClientOptions {
  /** The gateway's base URL, e.g. http://127.0.0.1:3000. */
  readonly baseUrl: string;
  /** A bearer access token, or a function giving the current one (tokens last an hour). */
  readonly token: string | (() => string | Promise<string>);
  readonly fetch?: typeof globalThis.fetch;
}

/**
 * A typed client of the Mission Service API, generated from the gateway's OpenAPI document
 * (openapi-typescript types, openapi-fetch calls): paths, parameters, bodies and responses are
 * checked by the compiler against the document the server serves.
 */
export function createApiClient(options: ApiClientOptions): ApiClient {
  const client = createClient<paths>({ baseUrl: options.baseUrl.replace(/\/$/, ''), ...(options.fetch ? { fetch: options.fetch } : {}) });
  const bearer: Middleware = {
    async onRequest({ request }) {
      const token = typeof options.token === 'function' ? await options.token() : options.token;
      request.headers.set('Authorization', `Bearer ${token}`);
      return request;
    },
  };
  client.use(bearer);
  return client;
}

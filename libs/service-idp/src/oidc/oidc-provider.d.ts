/**
 * The part of oidc-provider's API this app uses. The package ships no type declarations, and
 * only `oidc/provider.ts` may import it (it is ESM-only, which Jest cannot load).
 */
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http';

  export type AdapterPayload = Record<string, unknown>;

  export interface Adapter {
    upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void>;
    find(id: string): Promise<AdapterPayload | undefined>;
    findByUserCode(userCode: string): Promise<AdapterPayload | undefined>;
    findByUid(uid: string): Promise<AdapterPayload | undefined>;
    consume(id: string): Promise<void>;
    destroy(id: string): Promise<void>;
    revokeByGrantId(grantId: string): Promise<void>;
  }

  export type AdapterConstructor = new (model: string) => Adapter;

  /** A registered client as oidc-provider holds it; extra metadata keeps its snake_case name. */
  export interface Client {
    readonly clientId: string;
    readonly clientSecret?: string;
    readonly scope?: string;
    readonly [metadata: string]: unknown;
  }

  export interface ClientStatic {
    readonly prototype: { compareClientSecret(this: Client, presented: string): boolean | Promise<boolean> };
  }

  export interface ResourceServerInfo {
    readonly scope: string;
    readonly audience?: string;
    readonly accessTokenTTL?: number;
    readonly accessTokenFormat?: 'opaque' | 'jwt';
    readonly jwt?: { readonly sign?: { readonly alg?: string; readonly kid?: string } };
  }

  export interface ResourceServer extends ResourceServerInfo {
    identifier(): string;
  }

  export interface AccessTokenLike {
    readonly kind: string;
    readonly client?: Client;
    readonly clientId?: string;
    scope?: string;
  }

  export interface ClientCredentialsToken extends AccessTokenLike {
    resourceServer?: ResourceServer;
    readonly expiration: number;
    readonly tokenType: string;
    save(): Promise<string>;
  }

  export interface OIDCContext {
    readonly params?: Readonly<Record<string, unknown>>;
    readonly client?: Client;
    readonly route?: string;
    entity(name: string, value: unknown): void;
  }

  export interface KoaContextWithOIDC {
    readonly oidc: OIDCContext;
    readonly req: IncomingMessage;
    readonly res: ServerResponse;
    /** False when a middleware wrote the raw response itself. */
    respond?: boolean;
    set(field: string, value: string): void;
    readonly method: string;
    readonly path: string;
    /** The client's address (the socket's, or the proxy's X-Forwarded-For when trusted). */
    readonly ip: string;
    /** Per-request state shared by middleware. */
    readonly state: Record<string, unknown>;
    status: number;
    type: string;
    body: unknown;
  }

  export interface JwtStructuredToken {
    header?: Record<string, unknown>;
    payload: Record<string, unknown>;
  }

  export interface Configuration {
    adapter?: AdapterConstructor;
    jwks?: { keys: Array<Record<string, unknown>> };
    cookies?: { keys?: string[] };
    clientAuthMethods?: string[];
    clientDefaults?: Record<string, unknown>;
    clientBasedCORS?: (ctx: KoaContextWithOIDC, origin: string, client: Client) => boolean;
    responseTypes?: string[];
    scopes?: string[];
    /** Authorization request parameters beyond the standard ones, kept in the interaction's params. */
    extraParams?: string[];
    extraClientMetadata?: {
      properties?: string[];
      validator?: (ctx: KoaContextWithOIDC | undefined, key: string, value: unknown, metadata: Record<string, unknown>) => void;
    };
    extraTokenClaims?: (ctx: KoaContextWithOIDC, token: AccessTokenLike) => Promise<Record<string, unknown> | undefined>;
    findAccount?: (ctx: KoaContextWithOIDC, sub: string, token?: unknown) => Promise<Account | undefined>;
    interactions?: { url?: (ctx: KoaContextWithOIDC, interaction: { readonly uid: string }) => string | Promise<string> };
    pkce?: { required?: (ctx: KoaContextWithOIDC, client: Client) => boolean };
    rotateRefreshToken?: boolean | ((ctx: KoaContextWithOIDC) => boolean | Promise<boolean>);
    renderError?: (ctx: KoaContextWithOIDC, out: Record<string, string>, error: Error) => Promise<void>;
    features?: Record<string, Record<string, unknown>>;
    formats?: {
      customizers?: { jwt?: (ctx: KoaContextWithOIDC, token: AccessTokenLike, jwt: JwtStructuredToken) => void | Promise<void> };
    };
    ttl?: Record<string, number | ((ctx: KoaContextWithOIDC, token: unknown, client: Client) => number)>;
    enabledJWA?: Record<string, string[]>;
  }

  export interface Account {
    readonly accountId: string;
    claims(): Promise<{ sub: string; [claim: string]: unknown }>;
  }

  export interface InteractionDetails {
    readonly uid: string;
    readonly prompt: { readonly name: string; readonly reasons: readonly string[]; readonly details: Record<string, unknown> };
    readonly params: Readonly<Record<string, unknown>>;
    readonly session?: { readonly accountId?: string };
    readonly grantId?: string;
  }

  export interface InteractionResult {
    readonly login?: { readonly accountId: string };
    readonly consent?: { readonly grantId: string };
    readonly error?: string;
    readonly error_description?: string;
  }

  export interface Grant {
    addOIDCScope(scope: string): void;
    rejectOIDCScope(scope: string): void;
    addResourceScope(resource: string, scope: string): void;
    rejectResourceScope(resource: string, scope: string): void;
    save(): Promise<string>;
  }

  export interface GrantStatic {
    new (properties: { clientId: string; accountId: string }): Grant;
    find(id: string): Promise<Grant | undefined>;
  }

  export class Provider {
    constructor(issuer: string, configuration?: Configuration);
    /** The Koa context of the request being served (the library's own AsyncLocalStorage), if any. */
    static readonly ctx: KoaContextWithOIDC | undefined;
    /** Koa's `proxy`: trust X-Forwarded-For/-Proto/-Host from a proxy in front (ctx.ip, secure cookies). */
    proxy: boolean;
    /** Koa's `maxIpsCount`: how many of X-Forwarded-For's last addresses count (0: all, the first being the caller). */
    maxIpsCount: number;
    readonly issuer: string;
    readonly Client: ClientStatic;
    readonly Grant: GrantStatic;
    interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<InteractionDetails>;
    interactionFinished(req: IncomingMessage, res: ServerResponse, result: InteractionResult, options?: { mergeWithLastSubmission?: boolean }): Promise<void>;
    readonly ClientCredentials: new (properties: { client: Client; scope?: string }) => ClientCredentialsToken;
    readonly ResourceServer: new (identifier: string, info: ResourceServerInfo) => ResourceServer;
    callback(): (req: IncomingMessage, res: ServerResponse) => Promise<void>;
    registerGrantType(name: string, handler: (ctx: KoaContextWithOIDC) => Promise<void>, parameters?: string[], allowedDuplicateParameters?: string[]): void;
    on(event: string, listener: (...args: unknown[]) => void): this;
    use(middleware: (ctx: KoaContextWithOIDC, next: () => Promise<void>) => Promise<void>): this;
  }

  export class OIDCProviderError extends Error {
    readonly status: number;
    readonly error: string;
    readonly error_description?: string;
  }

  export const errors: {
    readonly InvalidScope: new (description: string, scope: string) => OIDCProviderError;
    readonly InvalidTarget: new (description?: string) => OIDCProviderError;
    readonly InvalidClientMetadata: new (description: string) => OIDCProviderError;
  };

  export default Provider;
}

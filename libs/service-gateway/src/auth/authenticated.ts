/** Who is calling, as established from a verified access token. */
export interface Authenticated {
  readonly subject: string;
  readonly clientId: string;
  readonly scopes: ReadonlySet<string>;
  /** Absent for the platform operator. */
  readonly tenantId?: string;
  readonly tokenId: string;
  /** A person's token only (the idp's `username` claim): the user's name in the tenant. */
  readonly username?: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    auth?: Authenticated;
  }
}

import { lookup } from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { RequestFilteringHttpAgent, RequestFilteringHttpsAgent } from 'request-filtering-agent';
import { DomainError, ErrorCode } from '@mission/contracts';
import { DEFAULT_DISPATCH_CONCURRENCY } from './dispatcher';

/**
 * Addresses ipaddr.js calls unicast that are not public all the same: IPv4-compatible IPv6 (which
 * may reach IPv4 loopback or private hosts), deprecated site-local IPv6, the NAT64 prefixes (which
 * translate to any IPv4 address, private ones included), and Azure's platform endpoint.
 */
export const NOT_PUBLIC_RANGES: readonly string[] = ['::/96', 'fec0::/10', '64:ff9b::/96', '64:ff9b:1::/48', '168.63.129.16/32'];

/** How long registration waits for a name to resolve before accepting it unresolved. */
const LOOKUP_TIMEOUT_MS = 3_000;

/**
 * Where webhooks may point. By default only `https://` URLs whose host is, and resolves only to,
 * public unicast addresses: no loopback, private, link-local (cloud metadata), unique-local,
 * IPv4-mapped, multicast, reserved or unspecified address. The same rule holds again when a
 * delivery connects (the agents below check the address actually dialled), so a name that
 * resolves elsewhere later (DNS rebinding) reaches nothing private either. `allowPrivate`
 * (WEBHOOKS_ALLOW_PRIVATE, for local development) allows `http://` and every address.
 */
export class WebhookTargetPolicy {
  /** The agents deliveries connect through: they refuse a forbidden address at connect time. */
  readonly agents: { readonly http: http.Agent; readonly https: https.Agent };

  constructor(
    readonly allowPrivate: boolean,
    private readonly resolve: (hostname: string) => Promise<ReadonlyArray<{ address: string }>> = (hostname) => lookup(hostname, { all: true, verbatim: true }),
  ) {
    const filter = { allowPrivateIPAddress: allowPrivate, allowMetaIPAddress: allowPrivate, denyIPAddressList: allowPrivate ? [] : [...NOT_PUBLIC_RANGES] };
    // Connections are kept for the next delivery to the same host (every new one is checked as it
    // connects), idle ones for 30 s, as many idle per host as the dispatcher has attempts in flight.
    // No limit per host in the agent: the dispatcher's own bounds (one attempt per webhook, 64 per
    // replica) are the limits, and an attempt waiting in the agent for a connection would have its
    // timeout running, so one tenant's slow endpoints on a shared receiver could fail another
    // tenant's deliveries there. (At 8 per host, with 4 kept idle, the ninth slow endpoint held
    // every other delivery to its host until an attempt timed out.)
    const pool = { keepAlive: true, keepAliveMsecs: 1_000, maxSockets: Infinity, maxFreeSockets: DEFAULT_DISPATCH_CONCURRENCY, timeout: 30_000 };
    this.agents = { http: new RequestFilteringHttpAgent({ ...filter, ...pool }), https: new RequestFilteringHttpsAgent({ ...filter, ...pool }) };
  }

  /** The URL as it will be called, or a 400 naming what is wrong with it. */
  async check(raw: string): Promise<URL> {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw refused('is not an absolute URL');
    }
    if (url.protocol !== 'https:' && !(this.allowPrivate && url.protocol === 'http:')) throw refused('must be an https:// URL');
    if (url.username || url.password) throw refused('must not carry credentials; authenticate the request by its signature');
    if (url.hash) throw refused('must not have a fragment');
    if (this.allowPrivate) return url;
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    if (isIP(host) !== 0) {
      if (!isPublicAddress(host)) throw refused('must not name a loopback, private, link-local or metadata address');
      return url;
    }
    // A name that does not resolve (yet) is accepted: its deliveries fail until it does, and every
    // connection is checked when it is made.
    const addresses = await Promise.race([
      this.resolve(host),
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error('DNS timed out')), LOOKUP_TIMEOUT_MS).unref()),
    ]).catch(() => []);
    if (addresses.some(({ address }) => !isPublicAddress(address))) throw refused(`must not resolve to a loopback, private, link-local or metadata address (${host} does)`);
    return url;
  }
}

const NOT_PUBLIC = NOT_PUBLIC_RANGES.map((cidr) => ipaddr.parseCIDR(cidr));

/** A public unicast address: one ipaddr.js calls `unicast` (IPv4 or IPv6), outside NOT_PUBLIC_RANGES. */
export function isPublicAddress(address: string): boolean {
  try {
    const parsed = ipaddr.parse(address);
    return parsed.range() === 'unicast' && !NOT_PUBLIC.some(([range, bits]) => range.kind() === parsed.kind() && parsed.match(range, bits));
  } catch {
    return false;
  }
}

function refused(why: string): DomainError {
  return new DomainError(ErrorCode.ValidationFailed, `The webhook URL ${why}`, [{ field: 'url', message: why }]);
}

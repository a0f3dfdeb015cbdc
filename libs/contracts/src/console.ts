/*
 * The approvals console: a page the gateway serves for the people who decide, signed in through
 * the identity provider as the platform's own public client.
 */

/** Where the gateway serves the console. */
export const CONSOLE_PATH = '/console/';

/** The console's client id at the identity provider: one public client (PKCE, no secret) for every tenant's users. */
export const CONSOLE_CLIENT_ID = 'mission-console';

/** The scopes the console asks for; a token gets those of them the user holds. */
export const CONSOLE_SCOPES = ['openid', 'offline_access', 'missions:read', 'hits:read', 'hits:approve'] as const;

/** The console's address for a gateway's public URL (`http://127.0.0.1:3000` → `http://127.0.0.1:3000/console/`). */
export function consoleUrl(publicUrl: string): string {
  return new URL(CONSOLE_PATH.slice(1), publicUrl.endsWith('/') ? publicUrl : `${publicUrl}/`).toString();
}

/** Where the identity provider sends the console's sign-ins back: `<console>/callback`, its only redirect URI. */
export function consoleRedirectUri(consoleAddress: string): string {
  return new URL('callback', consoleAddress).toString();
}

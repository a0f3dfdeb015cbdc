import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { AuthenticationThrottle, ThrottleDecision } from './authentication-throttle';
import type { KoaContextWithOIDC, Provider } from 'oidc-provider';
import { TENANT_SCOPES, USER_PASSWORD_MAX_LENGTH } from '@mission/contracts';
import { hashSecret, verifySecret } from '@mission/crypto';
import type { UserEntity } from '../users/user.entity';
import type { ClientDirectory } from './client-directory';
import { CONSOLE_CLIENT_ID } from './client-metadata';
import { loginPage, messagePage, PAGE_HEADERS } from './login-page';

export interface InteractionDependencies {
  readonly provider: Provider;
  readonly clients: Pick<ClientDirectory, 'find'>;
  readonly users: { findById(id: string): Promise<UserEntity | null>; findByUsername(tenantId: string, username: string): Promise<UserEntity | null> };
  /** The organisation a console user names at sign-in, by id or name. */
  readonly tenants: { findByReference(reference: string): Promise<{ readonly id: string } | null> };
  /** The gateway: the resource every sign-in grant is for. */
  readonly audience: string;
  /** Budgets of password verifications, per user and per source address. */
  readonly throttle: Pick<AuthenticationThrottle, 'authenticate'>;
}

const INTERACTION_PATH = /^\/interaction\/([A-Za-z0-9_-]{1,64})(\/login)?$/;
const MAX_FORM_BYTES = 8 * 1024;
const SIGN_IN_FAILED = 'The username or password is not right.';
const CONSOLE_SIGN_IN_FAILED = 'The organisation, username or password is not right.';
/** A well-formed tenant id no tenant has (drawn once per process: 122 random bits). */
const NO_TENANT = randomUUID();
/** OIDC scopes a sign-in may carry besides the tenant scopes. */
const OIDC_SCOPES = new Set(['openid', 'offline_access']);

/** Compared against when the username is unknown, so that a miss costs the same time as a wrong password. */
const decoy = hashSecret('decoy password that matches nothing');

async function readForm(req: IncomingMessage): Promise<URLSearchParams | undefined> {
  if (!/^application\/x-www-form-urlencoded\b/i.test(req.headers['content-type'] ?? '')) return undefined;
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_FORM_BYTES) return undefined;
    chunks.push(chunk as Buffer);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

function page(ctx: KoaContextWithOIDC, status: number, html: string): void {
  ctx.status = status;
  for (const [name, value] of Object.entries(PAGE_HEADERS)) ctx.set(name, value);
  ctx.body = html;
}

/**
 * The end-user side of authorization_code: a plain login page for a tenant's users, and consent
 * given on their behalf (first-party clients) as a grant of the scopes both the user and the
 * client hold; anything else asked for is recorded as rejected. A user signs in only through a
 * client of their own tenant, or through the approvals console, which has no tenant: there the
 * user names their organisation (its id, or its name when no other has it) on the login page.
 */
export function interactionRoutes(deps: InteractionDependencies): (ctx: KoaContextWithOIDC, next: () => Promise<void>) => Promise<void> {
  return async (ctx, next) => {
    const match = INTERACTION_PATH.exec(ctx.path);
    if (!match) return next();
    const isLogin = match[2] === '/login';
    if ((isLogin && ctx.method !== 'POST') || (!isLogin && ctx.method !== 'GET')) {
      page(ctx, 405, messagePage('Not allowed', 'This page does not answer that method.'));
      return;
    }
    let details;
    try {
      details = await deps.provider.interactionDetails(ctx.req, ctx.res);
    } catch {
      page(ctx, 400, messagePage('Sign-in expired', 'This sign-in has expired or was already used. Start again from the application.'));
      return;
    }
    if (details.uid !== match[1]) {
      page(ctx, 400, messagePage('Sign-in expired', 'This sign-in does not belong to this browser session. Start again from the application.'));
      return;
    }
    const clientId = String(details.params.client_id ?? '');
    const client = await deps.clients.find(clientId);
    const isConsole = client !== undefined && client.client_id === CONSOLE_CLIENT_ID;
    const clientTenant = client?.tenant_id;
    if (!client || (!clientTenant && !isConsole)) {
      await finish(ctx, deps, { error: 'access_denied', error_description: 'only tenant clients and the console sign users in' });
      return;
    }
    const clientName = isConsole ? 'the approvals console' : clientId;
    const organisationHint = typeof details.params.organization === 'string' ? details.params.organization.slice(0, 200) : '';

    if (details.prompt.name === 'login') {
      const form = isLogin ? await readForm(ctx.req) : undefined;
      const organisation = isConsole ? (isLogin ? (form?.get('organisation') ?? '') : organisationHint).trim() : undefined;
      const model = { uid: details.uid, clientName, organisation };
      if (!isLogin) {
        page(ctx, 200, loginPage(model));
        return;
      }
      const username = (form?.get('username') ?? '').trim();
      const password = form?.get('password') ?? '';
      const tenantId = isConsole ? (await deps.tenants.findByReference(organisation ?? ''))?.id : clientTenant;
      // Each attempt counts before scrypt runs: a user or source over its budget is refused without
      // it, with how long to wait; a user under attack is locked for a while, guessing goes no faster.
      // An organisation nobody has is still a budget of its own (what was typed), and still costs a check.
      const subject = `${tenantId ?? `unknown:${(organisation ?? '').toLowerCase()}`}:${username.toLowerCase()}`;
      const refuse = (decision: ThrottleDecision): void => {
        ctx.set('Retry-After', String(decision.retryAfterSeconds));
        page(ctx, 429, loginPage({ ...model, username, error: `Too many sign-in attempts. Try again in ${decision.retryAfterSeconds} seconds.` }));
      };
      const found: { user?: Awaited<ReturnType<typeof deps.users.findByUsername>> } = {};
      const outcome = await deps.throttle.authenticate('user', subject, ctx.ip, async () => {
        // The user is looked up even for an organisation nobody has (in a tenant that cannot exist),
        // so that an unknown organisation costs what an unknown user does: no timing tells them apart.
        found.user = username.length > 0 && username.length <= 100 ? await deps.users.findByUsername(tenantId ?? NO_TENANT, username) : null;
        return password.length > 0 && password.length <= USER_PASSWORD_MAX_LENGTH && (await verifySecret(password, found.user?.passwordHash ?? (await decoy)));
      });
      if (outcome.refused) {
        refuse(outcome.refused);
        return;
      }
      const { user } = found;
      if (!user || !outcome.valid) {
        page(ctx, 401, loginPage({ ...model, username, error: isConsole ? CONSOLE_SIGN_IN_FAILED : SIGN_IN_FAILED }));
        return;
      }
      await finish(ctx, deps, { login: { accountId: user.id } });
      return;
    }

    if (details.prompt.name === 'consent') {
      const user = details.session?.accountId ? await deps.users.findById(details.session.accountId) : null;
      // The console's users are of whichever tenant they signed in to; a tenant client's, of its tenant only.
      if (!user || (!isConsole && user.tenantId !== clientTenant)) {
        await finish(ctx, deps, { error: 'access_denied', error_description: 'the user does not belong to this client’s tenant' });
        return;
      }
      const requested = String(details.params.scope ?? '')
        .split(' ')
        .filter(Boolean);
      const clientScopes = new Set(String(client.scope).split(' '));
      const allowed = new Set(user.scopes.filter((scope) => clientScopes.has(scope)));
      const tenantScopes = new Set<string>(TENANT_SCOPES);
      // A new grant every time, of the scopes the user holds now: an earlier grant would keep a
      // scope taken from the user since (and a reload of the console runs consent again).
      const grant = new deps.provider.Grant({ clientId, accountId: user.id });
      // The provider knows the tenant scopes as its own scopes too, so each is granted (or refused) both ways.
      const granted = requested.filter((scope) => allowed.has(scope));
      const refused = requested.filter((scope) => !OIDC_SCOPES.has(scope) && !allowed.has(scope) && tenantScopes.has(scope));
      const oidc = [...requested.filter((scope) => OIDC_SCOPES.has(scope)), ...granted];
      if (oidc.length > 0) grant.addOIDCScope(oidc.join(' '));
      if (granted.length > 0) grant.addResourceScope(deps.audience, granted.join(' '));
      if (refused.length > 0) {
        grant.rejectOIDCScope(refused.join(' '));
        grant.rejectResourceScope(deps.audience, refused.join(' '));
      }
      // The consent keeps the login of this same sign-in: with prompt=login the provider asks for the
      // login again unless the interaction's result still holds it.
      await finish(ctx, deps, { consent: { grantId: await grant.save() } }, true);
      return;
    }

    page(ctx, 400, messagePage('Cannot continue', 'This sign-in asks for something this service does not offer.'));
  };
}

/** Hands the result back to the provider, which redirects the browser; the response is written there. */
async function finish(ctx: KoaContextWithOIDC, deps: InteractionDependencies, result: Parameters<Provider['interactionFinished']>[2], merge = false): Promise<void> {
  ctx.respond = false;
  await deps.provider.interactionFinished(ctx.req, ctx.res, result, { mergeWithLastSubmission: merge });
}

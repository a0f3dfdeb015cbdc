import { lookCss } from '@mission/ui-look';

/** The idp's own pages: plain server-rendered HTML in the platform's look (the console's), no script, nothing loaded from elsewhere. */

function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (char) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[char] ?? char);
}

/** Headers every page carries: no caching, no framing, no script, no outside resources. */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
};

function layout(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · Mission Service</title>
<style>
${lookCss()}
</style>
</head>
<body>
<header class="masthead"><span class="brand">Mission Service</span></header>
<main class="narrow"><div class="card">
${body}
</div></main>
</body>
</html>`;
}

export interface LoginPageModel {
  /** The interaction's uid: the form posts back to it. */
  readonly uid: string;
  /** What the user is signing in to: a tenant client's id, or "the approvals console". */
  readonly clientName: string;
  /** Set for the approvals console: the user names their organisation (pre-filled with this). */
  readonly organisation?: string;
  readonly username?: string;
  readonly error?: string;
}

export function loginPage(model: LoginPageModel): string {
  const action = `/interaction/${encodeURIComponent(model.uid)}/login`;
  const askOrganisation = model.organisation !== undefined;
  const focusOrganisation = askOrganisation && model.organisation === '';
  // A refused attempt marks the fields and ties the message to them, for screen readers.
  const invalid = model.error ? ' aria-invalid="true" aria-describedby="sign-in-error"' : '';
  const organisationField = askOrganisation
    ? `<label for="organisation">Organisation</label>
<input id="organisation" name="organisation" type="text" autocomplete="organization" required maxlength="200" aria-describedby="organisation-hint${model.error ? ' sign-in-error' : ''}"${model.error ? ' aria-invalid="true"' : ''} value="${escapeHtml(model.organisation ?? '')}"${focusOrganisation ? ' autofocus' : ''}>
<p class="hint" id="organisation-hint">Its name, or its id if another organisation has the same name.</p>
`
    : '';
  return layout(
    'Sign in',
    `<h1>Sign in</h1>
<p class="muted">to continue to <strong>${escapeHtml(model.clientName)}</strong></p>
<form method="post" action="${escapeHtml(action)}" autocomplete="on">
${organisationField}<label for="username">Username</label>
<input id="username" name="username" type="text" autocomplete="username" required maxlength="100"${invalid} value="${escapeHtml(model.username ?? '')}"${focusOrganisation ? '' : ' autofocus'}>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required maxlength="1024"${invalid}>
${model.error ? `<p class="error" id="sign-in-error" role="alert">${escapeHtml(model.error)}</p>` : ''}
<p><button type="submit">Sign in</button></p>
</form>`,
  );
}

export function messagePage(title: string, message: string): string {
  return layout(title, `<h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p>`);
}

/** The page that asks a user to confirm signing out (oidc-provider's end-session prompt; `form` is its hidden form). */
export function signOutPage(form: string): string {
  return layout(
    'Sign out',
    `<h1>Sign out</h1>
<p>Sign out of Mission Service on this browser?</p>
${form}
<p><button type="submit" form="op.logoutForm" name="logout" value="yes" autofocus>Sign out</button></p>`,
  );
}

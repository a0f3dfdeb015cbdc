/** The idp's own pages: plain server-rendered HTML, no script, nothing loaded from elsewhere. */

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
body { font-family: system-ui, sans-serif; max-width: 24rem; margin: 4rem auto; padding: 0 1rem; color: #1d2330; }
label { display: block; margin-top: 1rem; font-weight: 600; }
input { width: 100%; padding: .5rem; margin-top: .25rem; box-sizing: border-box; }
button { margin-top: 1.5rem; padding: .6rem 1.2rem; }
.error { color: #a4161a; margin-top: 1rem; }
</style>
</head>
<body>
${body}
</body>
</html>`;
}

export interface LoginPageModel {
  /** The interaction's uid: the form posts back to it. */
  readonly uid: string;
  readonly clientId: string;
  readonly username?: string;
  readonly error?: string;
}

export function loginPage(model: LoginPageModel): string {
  const action = `/interaction/${encodeURIComponent(model.uid)}/login`;
  return layout(
    'Sign in',
    `<h1>Sign in</h1>
<p>to continue to <strong>${escapeHtml(model.clientId)}</strong></p>
<form method="post" action="${escapeHtml(action)}" autocomplete="on">
<label for="username">Username</label>
<input id="username" name="username" type="text" autocomplete="username" required maxlength="100" value="${escapeHtml(model.username ?? '')}" autofocus>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required maxlength="1024">
${model.error ? `<p class="error" role="alert">${escapeHtml(model.error)}</p>` : ''}
<button type="submit">Sign in</button>
</form>`,
  );
}

export function messagePage(title: string, message: string): string {
  return layout(title, `<h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p>`);
}

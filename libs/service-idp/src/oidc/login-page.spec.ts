import { loginPage, signOutPage } from './login-page';

describe('the idp login page', () => {
  it("asks a tenant client's users for their username and password only", () => {
    const html = loginPage({ uid: 'u1', clientName: 'cl_abc' });
    expect(html).toContain('to continue to <strong>cl_abc</strong>');
    expect(html).not.toContain('name="organisation"');
    expect(html).toMatch(/id="username"[^>]* autofocus/);
  });

  it("asks the console's users for their organisation too, focused first unless a link named it", () => {
    const empty = loginPage({ uid: 'u1', clientName: 'the approvals console', organisation: '' });
    expect(empty).toMatch(/<label for="organisation">Organisation<\/label>/);
    expect(empty).toMatch(/id="organisation"[^>]* autofocus/);
    const named = loginPage({ uid: 'u1', clientName: 'the approvals console', organisation: 'Acme' });
    expect(named).toContain('value="Acme"');
    expect(named).toMatch(/id="username"[^>]* autofocus/);
  });

  it('escapes what the user typed and what the link carried', () => {
    const html = loginPage({ uid: 'u"1', clientName: 'x', organisation: '"><script>alert(1)</script>', username: "<b>o'neil</b>", error: '<i>no</i>' });
    expect(html).not.toMatch(/<script|<b>|<i>/);
    expect(html).toContain('&quot;&gt;&lt;script&gt;');
    expect(html).toContain('action="/interaction/u%221/login"');
  });

  it('carries the platform look inline and no script', () => {
    const html = loginPage({ uid: 'u1', clientName: 'x' });
    expect(html).toContain('--accent:');
    expect(html).toContain('class="masthead"');
    expect(html).not.toMatch(/<script/);
    expect(signOutPage('<form id="op.logoutForm" method="post" action="/session/end/confirm"></form>')).toContain('form="op.logoutForm"');
  });
});

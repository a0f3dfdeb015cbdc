import { consoleContentSecurityPolicy } from './console.routes';

describe('the console page policy', () => {
  it('allows its own script and style only, and data from the gateway and the identity provider', () => {
    const policy = consoleContentSecurityPolicy('https://api.example.com', 'https://id.example.com');
    const directives = Object.fromEntries(policy.split('; ').map((directive) => [directive.split(' ')[0], directive.split(' ').slice(1).join(' ')]));
    expect(directives).toEqual({
      'default-src': "'none'",
      'script-src': "'self'",
      'style-src': "'self'",
      'img-src': "'self' data:",
      'connect-src': "'self' https://api.example.com https://id.example.com",
      'base-uri': "'none'",
      'form-action': "'none'",
      'frame-ancestors': "'none'",
    });
  });

  it('names an origin once when the gateway and the identity provider share it', () => {
    expect(consoleContentSecurityPolicy('http://127.0.0.1:3000/', 'http://127.0.0.1:3000')).toContain("connect-src 'self' http://127.0.0.1:3000;");
  });
});

// Which server this process is, for the profilers' preloads (cpu-profile.cjs, alloc-profile.cjs):
// its name (the app, `baseline`, `floor-front` or `floor-responder`), or undefined for anything
// else that inherits the environment (npm, scripts, tools), which is not profiled.
function profiledApp(entry = process.argv[1] ?? '') {
  const app = /(?:apps\/([^/]+)\/src\/main\.ts|bench\/(baseline)\/main\.ts|bench\/kafka-floor\/(front|responder)\.ts)$/.exec(entry.replace(/\\/g, '/'));
  if (!app) return undefined;
  return app[1] ?? app[2] ?? `floor-${app[3]}`;
}

module.exports = { profiledApp };

// Preloaded into every server (NODE_OPTIONS=--require ...) by `npm run bench -- --cpu-prof`:
// NODE_OPTIONS cannot carry --cpu-prof, and the distributed processes are started by the
// integration suite's helper, which takes no node flags. Samples the whole process life and
// writes <MISSION_BENCH_PROFILE_DIR>/<app>.<pid>.cpuprofile (Chrome DevTools format) on exit.
const fs = require('node:fs');
const inspector = require('node:inspector');
const path = require('node:path');

const { profiledApp } = require('./profiled-app.cjs');

const dir = process.env.MISSION_BENCH_PROFILE_DIR;
const name = profiledApp();

if (dir && name) {
  const session = new inspector.Session();
  session.connect();
  session.post('Profiler.enable');
  session.post('Profiler.start');
  process.on('exit', () => {
    // An in-process inspector session answers synchronously, so this completes before exit.
    session.post('Profiler.stop', (error, result) => {
      if (error || !result) return;
      fs.writeFileSync(path.join(dir, `${name}.${process.pid}.cpuprofile`), JSON.stringify(result.profile));
    });
  });
}

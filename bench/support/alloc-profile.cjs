// Preloaded into every server (NODE_OPTIONS=--require ...) by `npm run bench -- --alloc-prof`, as
// cpu-profile.cjs is by --cpu-prof. V8's sampling heap profiler over the whole process life, with
// the objects either collector freed kept in the profile (a request's garbage is what it costs in
// scavenges), one sample per 16 kB allocated on average; writes
// <MISSION_BENCH_ALLOC_PROFILE_DIR>/<app>.<pid>.heapprofile (Chrome DevTools' Memory panel, or
// `node -r ./tools/register.cjs bench/alloc-summary.ts <file>`) on exit.
const fs = require('node:fs');
const inspector = require('node:inspector');
const path = require('node:path');

const { profiledApp } = require('./profiled-app.cjs');

const dir = process.env.MISSION_BENCH_ALLOC_PROFILE_DIR;
const name = profiledApp();

if (dir && name) {
  const session = new inspector.Session();
  session.connect();
  session.post('HeapProfiler.enable');
  session.post('HeapProfiler.startSampling', { samplingInterval: 16384, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  process.on('exit', () => {
    // An in-process inspector session answers synchronously, so this completes before exit.
    session.post('HeapProfiler.stopSampling', (error, result) => {
      if (error || !result) return;
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, `${name}.${process.pid}.heapprofile`), JSON.stringify(result.profile));
    });
  });
}

// Preloaded into every server (NODE_OPTIONS=--require ...) by `npm run bench -- events`: on
// SIGUSR2 the server collects all garbage (twice: the first may leave objects that finalizers
// free), then writes its memory to <MISSION_BENCH_MEMORY_DIR>/<pid>.json. A resident-set figure
// read without a collection says as much about the heap's headroom as about what is held: the
// same 1,000 streams read anywhere from -167 to +18 MiB that way.
const fs = require('node:fs');
const path = require('node:path');
const v8 = require('node:v8');
const vm = require('node:vm');

const dir = process.env.MISSION_BENCH_MEMORY_DIR;
const entry = (process.argv[1] ?? '').replace(/\\/g, '/');

// Only the servers: not npm, scripts or tools that inherit the environment.
if (dir && /apps\/[^/]+\/src\/main\.ts$/.test(entry)) {
  v8.setFlagsFromString('--expose-gc');
  const collect = vm.runInNewContext('gc');
  // The suite signals only a server that says it has the probe: SIGUSR2 would otherwise end it.
  fs.writeFileSync(path.join(dir, `${process.pid}.ready`), '');
  process.on('SIGUSR2', () => {
    collect();
    collect();
    const usage = process.memoryUsage();
    const file = path.join(dir, `${process.pid}.json`);
    fs.writeFileSync(`${file}.tmp`, JSON.stringify({ rss: usage.rss, heapUsed: usage.heapUsed, external: usage.external, at: Date.now() }));
    fs.renameSync(`${file}.tmp`, file);
  });
}

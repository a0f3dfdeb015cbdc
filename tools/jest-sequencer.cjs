// `npm test` runs the unit suites and the end-to-end suite on two workers. The end-to-end suite
// is one file that takes longer than all the unit files together; left to Jest's order (by file
// size when it has no timings yet, as on a fresh clone) it would start last and run alone. It goes
// first, so the unit files run beside it.
const Sequencer = require('@jest/test-sequencer').default;

class EndToEndFirst extends Sequencer {
  async sort(tests) {
    // Jest's own order may come as a promise (its signature allows one).
    const sorted = await super.sort(tests);
    const endToEnd = (test) => /\.e2e-spec\.ts$/.test(test.path);
    return [...sorted.filter(endToEnd), ...sorted.filter((test) => !endToEnd(test))];
  }
}

module.exports = EndToEndFirst;

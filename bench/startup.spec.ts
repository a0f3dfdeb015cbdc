import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseStartupOptions, startCommands } from './startup';

describe('the startup suite', () => {
  it('runs what package.json starts: each command of the start script, with its node flags', () => {
    const script = JSON.parse(readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8')).scripts.start as string;
    const commands = startCommands(script);
    const server = commands[commands.length - 1] ?? [];
    expect(server[server.length - 1]).toBe('apps/standalone/src/main.ts');
    expect(server).toEqual(expect.arrayContaining(['-r', './tools/register.cjs']));
    expect(commands.map((args) => `node ${args.join(' ')}`).join(' && ')).toBe(script.replace(/\s+/g, ' ').trim());
  });

  it('refuses a start script it would run differently from a shell', () => {
    expect(() => startCommands('npm run build && node main.js')).toThrow(/not a plain node command/);
    expect(() => startCommands('node main.js | tee log')).toThrow(/not a plain node command/);
    expect(() => startCommands('node "a b.js"')).toThrow(/not a plain node command/);
    expect(() => startCommands('node')).toThrow(/not a plain node command/);
    expect(() => startCommands('node a.js & node b.js')).toThrow(/not a plain node command/);
    expect(() => startCommands('node (a.js)')).toThrow(/not a plain node command/);
    expect(() => startCommands('node a\\ b.js')).toThrow(/not a plain node command/);
    expect(startCommands('node a.js --x && node --flag b.js')).toEqual([
      ['a.js', '--x'],
      ['--flag', 'b.js'],
    ]);
  });

  it('takes --rounds and --write, and nothing else', () => {
    expect(parseStartupOptions([])).toEqual({ rounds: 5, write: false });
    expect(parseStartupOptions(['--rounds=3', '--write'])).toEqual({ rounds: 3, write: true });
    for (const bad of ['--rounds=0', '--rounds=2.5', '--rounds=51', '--rounds', '--write=yes', '--quick']) expect(() => parseStartupOptions([bad])).toThrow();
  });
});

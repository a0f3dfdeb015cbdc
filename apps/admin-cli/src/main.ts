import { AdminCall, commandToCall, perform, quickstart, resolveEnvironment, USAGE, UsageError } from './admin-cli';

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}

/** `npm run admin -- <command>`: the operator API from a terminal, printing its JSON. */
async function main(args: string[]): Promise<number> {
  if (args.length === 0 || args.includes('--help') || args.includes('-h')) {
    process.stdout.write(`${USAGE}\n`);
    return args.length === 0 ? 2 : 0;
  }
  if (args[0] === 'quickstart') {
    const result = await quickstart(args.slice(1), await resolveEnvironment(process.env, process.cwd()));
    if ('text' in result) process.stdout.write(`${result.text}\n`);
    else process.stderr.write(`${JSON.stringify(result.body, null, 2)}\n`);
    return result.ok ? 0 : 1;
  }
  let call: AdminCall = commandToCall(args);
  if (call.passwordFromStdin) call = { ...call, body: { ...call.body, password: await readStdin() } };
  const result = await perform(call, await resolveEnvironment(process.env, process.cwd()));
  const text = `${JSON.stringify(result.body, null, 2)}\n`;
  if (result.ok) process.stdout.write(text);
  else process.stderr.write(text);
  return result.ok ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    if (error instanceof UsageError) {
      process.stderr.write(`${error.message}\n\n${USAGE}\n`);
      process.exitCode = 2;
    } else {
      process.stderr.write(`${JSON.stringify({ error: error instanceof Error ? error.message : String(error) })}\n`);
      process.exitCode = 1;
    }
  },
);

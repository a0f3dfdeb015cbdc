import 'reflect-metadata';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { BaselineModule } from './baseline.module';

/**
 * The benchmark's baseline: a bare NestJS-on-Fastify app with one route, no auth, no bus, no
 * database. BASELINE_BODY is the JSON it answers (the benchmark passes the mission it measured);
 * without it, the fixed copy in mission.json.
 */
async function main(): Promise<void> {
  const body = process.env.BASELINE_BODY || readFileSync(path.join(__dirname, 'mission.json'), 'utf8');
  const mission = JSON.parse(body) as Record<string, unknown>;
  const app = await NestFactory.create<NestFastifyApplication>(BaselineModule.withMission(mission), new FastifyAdapter({ logger: false }), {
    logger: ['error', 'warn'],
  });
  await app.listen(Number(process.env.PORT ?? 3100), process.env.HOST ?? '127.0.0.1');
  let stopping = false;
  const stop = (): void => {
    if (stopping) process.exit(1);
    stopping = true;
    app.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((error: unknown) => {
  process.stderr.write(`baseline failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});

import { Body, Controller, Get, Headers, HttpCode, Param, Post, Query, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { MissionView, Page, Scopes } from '@mission/contracts';
import { Operation } from '../openapi/operation';
import { MissionOperations } from '../operations/missions.operations';

@Controller('api/missions')
export class MissionsController {
  constructor(private readonly missions: MissionOperations) {}

  @Post()
  @HttpCode(202)
  @Operation({
    operationId: 'submitMission',
    tag: 'Missions',
    summary: 'Submit a mission',
    description:
      'Queues a mission and answers at once; it runs its steps in order (`brain.query`, `approval`). Poll it until its status is final. ' +
      "Its steps act with the caller's authority: a mission with a `brain.query` step (the default step is one) also needs `brain:read`, 403 `insufficient_scope` naming it otherwise.",
    access: { scopes: [Scopes.missionsWrite] },
    body: {
      schema: 'SubmitMission',
      required: true,
      example: {
        title: 'Publish report',
        objective: 'Q3 numbers',
        steps: [
          { type: 'brain.query', k: 3 },
          { type: 'approval', title: 'OK to publish?' },
        ],
      },
    },
    idempotencyKey: true,
    success: { status: 202, description: 'Accepted: the mission, queued', schema: 'Mission', location: true },
    problems: [409, 422],
  })
  async submit(@Body() body: unknown, @Headers('idempotency-key') idempotencyKey: string | undefined, @Res({ passthrough: true }) reply: FastifyReply): Promise<MissionView> {
    const created = await this.missions.submit(body, idempotencyKey);
    void reply.header('Location', `/api/missions/${created.id}`);
    return created;
  }

  @Get()
  @Operation({
    operationId: 'listMissions',
    tag: 'Missions',
    summary: "The tenant's missions, newest first",
    access: { scopes: [Scopes.missionsRead] },
    query: 'missions',
    success: { status: 200, description: 'One page of missions', schema: 'MissionPage' },
  })
  list(@Query() query: Record<string, unknown>): Promise<Page<MissionView>> {
    return this.missions.list(query);
  }

  @Get(':id')
  @Operation({
    operationId: 'getMission',
    tag: 'Missions',
    summary: 'One mission with its steps and result',
    access: { scopes: [Scopes.missionsRead] },
    pathId: 'the mission id',
    success: { status: 200, description: 'The mission', schema: 'Mission' },
    problems: [404],
  })
  get(@Param('id') id: string): Promise<MissionView> {
    return this.missions.get(id);
  }

  @Post(':id/cancel')
  @HttpCode(200)
  @Operation({
    operationId: 'cancelMission',
    tag: 'Missions',
    summary: 'Cancel a mission that is not final',
    description: 'A HIT item the mission waits for is closed and leaves the pending list.',
    access: { scopes: [Scopes.missionsWrite] },
    pathId: 'the mission id',
    success: { status: 200, description: 'The mission, cancelled', schema: 'Mission' },
    problems: [404, 409],
  })
  cancel(@Param('id') id: string): Promise<MissionView> {
    return this.missions.cancel(id);
  }
}

import { Body, Controller, Get, HttpCode, Inject, Param, Post, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { MessageTypes, MissionView, parseOrThrow, Scopes, SubmitMissionSchema, Topics } from '@mission/contracts';
import type { MessageBus } from '@mission/messaging';
import { TenantScopes } from '../auth/auth.decorators';
import { BUS } from '../gateway.options';

@Controller('api/missions')
export class MissionsController {
  constructor(@Inject(BUS) private readonly bus: MessageBus) {}

  @Post()
  @HttpCode(202)
  @TenantScopes(Scopes.missionsWrite)
  async submit(@Body() body: unknown, @Res({ passthrough: true }) reply: FastifyReply): Promise<MissionView> {
    const request = parseOrThrow(SubmitMissionSchema, body, 'Mission');
    const mission = await this.bus.request<MissionView>(Topics.missionRequests, MessageTypes.missionSubmit, request);
    void reply.header('Location', `/api/missions/${mission.id}`);
    return mission;
  }

  @Get(':id')
  @TenantScopes(Scopes.missionsRead)
  get(@Param('id') id: string): Promise<MissionView> {
    return this.bus.request<MissionView>(Topics.missionRequests, MessageTypes.missionGet, { id });
  }
}

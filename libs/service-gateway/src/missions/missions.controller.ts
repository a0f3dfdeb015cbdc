import { Body, Controller, Get, Headers, HttpCode, Inject, Param, Post, Query, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import {
  DomainError,
  ErrorCode,
  IDEMPOTENCY_KEY_PATTERN,
  MessageTypes,
  ListMissionsQuerySchema,
  MissionView,
  Page,
  parseOrThrow,
  Scopes,
  SubmitMissionSchema,
  Topics,
} from '@mission/contracts';
import type { MessageBus } from '@mission/messaging';
import { TenantScopes } from '../auth/auth.decorators';
import { BUS } from '../gateway.options';

function idempotencyKeyOf(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (!IDEMPOTENCY_KEY_PATTERN.test(header)) {
    throw new DomainError(ErrorCode.ValidationFailed, 'The Idempotency-Key header is invalid', [
      { field: 'Idempotency-Key', message: 'must be 1 to 255 visible ASCII characters' },
    ]);
  }
  return header;
}

@Controller('api/missions')
export class MissionsController {
  constructor(@Inject(BUS) private readonly bus: MessageBus) {}

  @Post()
  @HttpCode(202)
  @TenantScopes(Scopes.missionsWrite)
  async submit(
    @Body() body: unknown,
    @Headers('idempotency-key') idempotencyKey: string | undefined,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<MissionView> {
    const mission = parseOrThrow(SubmitMissionSchema, body, 'Mission');
    const key = idempotencyKeyOf(idempotencyKey);
    const created = await this.bus.request<MissionView>(Topics.missionRequests, MessageTypes.missionSubmit, { mission, ...(key ? { idempotencyKey: key } : {}) });
    void reply.header('Location', `/api/missions/${created.id}`);
    return created;
  }

  @Get()
  @TenantScopes(Scopes.missionsRead)
  list(@Query() query: Record<string, unknown>): Promise<Page<MissionView>> {
    return this.bus.request<Page<MissionView>>(Topics.missionRequests, MessageTypes.missionList, parseOrThrow(ListMissionsQuerySchema, query, 'Query'));
  }

  @Get(':id')
  @TenantScopes(Scopes.missionsRead)
  get(@Param('id') id: string): Promise<MissionView> {
    return this.bus.request<MissionView>(Topics.missionRequests, MessageTypes.missionGet, { id });
  }

  @Post(':id/cancel')
  @HttpCode(200)
  @TenantScopes(Scopes.missionsWrite)
  cancel(@Param('id') id: string): Promise<MissionView> {
    return this.bus.request<MissionView>(Topics.missionRequests, MessageTypes.missionCancel, { id });
  }
}

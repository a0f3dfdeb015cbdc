import { Controller, DynamicModule, Get, Inject, Module } from '@nestjs/common';

export const MISSION_BODY = Symbol('MISSION_BODY');

/** The one route: the same path as the gateway's, answering a fixed copy of a mission. */
@Controller('api/missions')
export class BaselineController {
  constructor(@Inject(MISSION_BODY) private readonly mission: Record<string, unknown>) {}

  @Get(':id')
  get(): Record<string, unknown> {
    // Returned as an object, so Fastify serialises it on every request, as the gateway does
    // with the reply it gets from the bus.
    return this.mission;
  }
}

@Module({})
export class BaselineModule {
  static withMission(mission: Record<string, unknown>): DynamicModule {
    return { module: BaselineModule, controllers: [BaselineController], providers: [{ provide: MISSION_BODY, useValue: mission }] };
  }
}

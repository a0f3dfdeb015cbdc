import { Controller, HttpCode, Inject, Post } from '@nestjs/common';
import { MessageTypes, SigningKeyRotationView, Topics } from '@mission/contracts';
import type { MessageBus } from '@mission/messaging';
import { Operator } from '../auth/auth.decorators';
import { BUS } from '../gateway.options';

/** Operator API: the identity provider's signing keys. */
@Controller('admin/keys')
@Operator()
export class AdminKeysController {
  constructor(@Inject(BUS) private readonly bus: MessageBus) {}

  /** Publishes a new signing key now; it signs after the idp's publish delay (409 while a rotation is pending). */
  @Post('rotate')
  @HttpCode(201)
  rotate(): Promise<SigningKeyRotationView> {
    return this.bus.request<SigningKeyRotationView>(Topics.identityRequests, MessageTypes.signingKeyRotate, {});
  }
}

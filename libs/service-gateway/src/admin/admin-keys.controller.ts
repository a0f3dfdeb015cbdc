import { Controller, HttpCode, Inject, Post } from '@nestjs/common';
import { MessageTypes, SigningKeyRotationView, Topics } from '@mission/contracts';
import type { MessageBus } from '@mission/messaging';
import { Operator } from '../auth/auth.decorators';
import { Operation } from '../openapi/operation';
import { BUS } from '../gateway.options';

/** Operator API: the identity provider's signing keys. */
@Controller('admin/keys')
@Operator()
export class AdminKeysController {
  constructor(@Inject(BUS) private readonly bus: MessageBus) {}

  /** Publishes a new signing key now; it signs after the idp's publish delay (409 while a rotation is pending). */
  @Post('rotate')
  @HttpCode(201)
  @Operation({
    operationId: 'rotateSigningKey',
    tag: 'Operator',
    summary: 'Publish a new signing key for the identity provider',
    description: 'The key is in the JWKS at once and signs from `activatesAt`; 409 while a rotation is pending.',
    access: 'operator',
    success: { status: 201, description: 'The new key', schema: 'SigningKeyRotation' },
    problems: [409],
  })
  rotate(): Promise<SigningKeyRotationView> {
    return this.bus.request<SigningKeyRotationView>(Topics.identityRequests, MessageTypes.signingKeyRotate, {});
  }
}

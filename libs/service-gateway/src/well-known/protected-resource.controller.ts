import { Controller, Get, Header, Inject } from '@nestjs/common';
import { TENANT_SCOPES } from '@mission/contracts';
import { Operation } from '../openapi/operation';
import { GATEWAY_OPTIONS, GatewayOptions } from '../gateway.options';

/** RFC 9728 metadata: how clients (MCP clients included) find the authorization server. */
@Controller('.well-known')
export class ProtectedResourceController {
  constructor(@Inject(GATEWAY_OPTIONS) private readonly options: GatewayOptions) {}

  @Get('oauth-protected-resource')
  @Header('Cache-Control', 'public, max-age=300')
  @Operation({
    operationId: 'protectedResourceMetadata',
    tag: 'Discovery and operations',
    summary: 'OAuth protected-resource metadata (RFC 9728): where to get a token',
    access: 'public',
    success: { status: 200, description: 'The metadata', schema: 'resource-metadata' },
  })
  metadata(): Record<string, unknown> {
    return {
      resource: this.options.publicUrl,
      authorization_servers: [this.options.issuer],
      scopes_supported: [...TENANT_SCOPES],
      bearer_methods_supported: ['header'],
      resource_name: 'Mission Service',
    };
  }
}

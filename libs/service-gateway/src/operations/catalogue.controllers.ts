import { Controller, Delete, Get, HttpCode, Inject, Patch, Post, Req, Res, type Type } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { type OperationDefinition, type OperationName, Operations } from '@mission/contracts';
import { Operation } from '../openapi/operation';
import { OperationRunner } from './operation-runner';

const ROUTE_DECORATORS = { GET: Get, POST: Post, PATCH: Patch, DELETE: Delete } as const;

/**
 * A controller serving the catalogue's operations under one path (a resource), one route each,
 * generated from their declarations: method and path, status, access and documentation. Every
 * handler hands its request to the OperationRunner, so a new operation of the catalogue needs no
 * controller code. The controller's name becomes a tag of its routes in the OpenAPI document.
 */
function catalogueController(name: string, resource: string): Type<unknown> {
  class CatalogueController {
    constructor(readonly runner: OperationRunner) {}
  }
  Inject(OperationRunner)(CatalogueController, undefined, 0);
  Controller()(CatalogueController);
  for (const [name, operation] of Object.entries(Operations) as Array<[OperationName, OperationDefinition]>) {
    if (!inResource(operation.http.path, resource)) continue;
    const { method, path, ...http } = operation.http;
    const key = http.operationId;
    Object.defineProperty(CatalogueController.prototype, key, {
      value: function (this: CatalogueController, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
        return this.runner.serveHttp(name, request, reply);
      },
      writable: true,
      configurable: true,
    });
    Req()(CatalogueController.prototype, key, 0);
    Res({ passthrough: true })(CatalogueController.prototype, key, 1);
    const descriptor = Object.getOwnPropertyDescriptor(CatalogueController.prototype, key) as PropertyDescriptor;
    for (const decorate of [ROUTE_DECORATORS[method](path), HttpCode(http.success.status), Operation({ ...http, access: operation.access })]) {
      decorate(CatalogueController.prototype, key, descriptor);
    }
  }
  Object.defineProperty(CatalogueController, 'name', { value: name });
  return CatalogueController;
}

function inResource(path: string, resource: string): boolean {
  return path === resource || path.startsWith(`${resource}/`);
}

/** The resources the catalogue's routes live under, each served by one controller. */
const RESOURCES = { missions: '/api/missions', brain: '/api/brain', hits: '/api/hit', webhooks: '/api/webhooks', tenants: '/admin/tenants', keys: '/admin/keys' } as const;

for (const operation of Object.values(Operations) as OperationDefinition[]) {
  if (!Object.values(RESOURCES).some((resource) => inResource(operation.http.path, resource))) {
    throw new Error(`${operation.http.operationId} is routed under none of the gateway's resources (${operation.http.path})`);
  }
}

/** The catalogue's controllers, in the order their routes are registered and documented. */
export const CATALOGUE_CONTROLLERS = {
  missions: catalogueController('MissionsController', RESOURCES.missions),
  brain: catalogueController('BrainController', RESOURCES.brain),
  hits: catalogueController('HitsController', RESOURCES.hits),
  webhooks: catalogueController('WebhooksController', RESOURCES.webhooks),
  tenants: catalogueController('AdminController', RESOURCES.tenants),
  keys: catalogueController('AdminKeysController', RESOURCES.keys),
} as const;

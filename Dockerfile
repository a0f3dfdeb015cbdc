# One image recipe for every deployable: `docker build --build-arg APP=<app> .`
# APP is one of: gateway, mission-service, brain-service, hit-service, idp, standalone, kafka-setup.
FROM node:24-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts=false && npm cache clean --force

# The approvals console: built with the dev dependencies (esbuild, lit), shipped as static files only.
FROM node:24-bookworm-slim AS console
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts && npm cache clean --force
COPY tsconfig.base.json ./
COPY tools/console ./tools/console
COPY apps/console ./apps/console
COPY libs/ui-look ./libs/ui-look
COPY libs/api-client ./libs/api-client
RUN node tools/console/build.mjs

FROM node:24-bookworm-slim AS runtime
ARG APP=gateway
ENV NODE_ENV=production APP=${APP}
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json tsconfig.json tsconfig.base.json ./
COPY tools/register.cjs tools/compile-cache.cjs tools/swc-options.cjs ./tools/
COPY libs ./libs
COPY apps ./apps
COPY --from=console /app/dist/console ./dist/console
# The modules compiled once here (node_modules/.cache/mission-register), so no server loads swc;
# a module that does not compile, or a cache that cannot be written, fails the build.
RUN find apps libs -name '*.spec.ts' -delete \
  && node tools/compile-cache.cjs --strict \
  && mkdir -p /app/.data && chown node:node /app/.data
USER node
EXPOSE 3000 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD node -e "const p=process.env.HEALTH_PORT||process.env.PORT||3000;fetch('http://127.0.0.1:'+p+'/health/live').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
CMD ["sh", "-c", "exec node -r ./tools/register.cjs apps/${APP}/src/main.ts"]

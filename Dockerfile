# syntax=docker/dockerfile:1
#
# The administration service's image: Node 24 runs the TypeScript sources directly (native type
# stripping, no build step), with Debian's Chromium (PDF) and LibreOffice over UNO (office formats).
#
#   docker build -t telecom-admin .
#   docker run -p 8080:8080 -v admin-data:/data -e AUTH_JWT_SECRET=... telecom-admin
#
# The base is pinned to one Node 24 release (the one CI runs). The release process should also pin
# its digest (node:24.21.0-bookworm-slim@sha256:...), resolved when the release is built: a tag can
# be re-pushed, a digest cannot.
ARG NODE_IMAGE=node:24.21.0-bookworm-slim

# --- deps: production dependencies only, exactly as locked ----------------------------------------
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# The postinstall (scripts/ensure-node.mjs) finds Node 24 already here and fetches nothing.
COPY scripts/ensure-node.mjs ./scripts/
RUN npm ci --omit=dev --no-audit --no-fund \
 && npm cache clean --force

# --- runtime ----------------------------------------------------------------------------------------
FROM ${NODE_IMAGE}

# chromium: PDF rendering through puppeteer-core (CHROME_PATH below).
# fonts-dejavu-core: one dependable font family for PDFs and office documents.
# libreoffice-*-nogui + python3-uno: one long-running soffice driven over UNO, no X11/GTK front end.
# tini: PID 1 that forwards SIGTERM to node and reaps the zombies Chromium and soffice helpers leave.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      chromium \
      fonts-dejavu-core \
      libreoffice-writer-nogui \
      libreoffice-calc-nogui \
      python3-uno \
      tini \
 && rm -rf /var/lib/apt/lists/*

ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    DATA_DIR=/data \
    CHROME_PATH=/usr/bin/chromium

WORKDIR /app

# Only what runs. Owned by root and read-only to the `node` user that runs the service.
COPY --from=deps /app/node_modules ./node_modules
COPY package.json package-lock.json ./
COPY api ./api
COPY domain ./domain
COPY infra ./infra
COPY modules ./modules
COPY projections ./projections
COPY workers ./workers
# The CLI (npx admin), a client of the REST API: usable inside the container too.
COPY cli ./cli

# The embedded stores and the generated auth secret live in DATA_DIR: the one writable place.
RUN mkdir -p /data && chown node:node /data
VOLUME ["/data"]

USER node
EXPOSE 8080
STOPSIGNAL SIGTERM

# No curl in the slim image: node's own fetch asks the open liveness route.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8080) + '/health/live', { signal: AbortSignal.timeout(4000) }).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]

ENTRYPOINT ["/usr/bin/tini", "--"]
# The preload starts OpenTelemetry when OTEL_* ask for it (README, Observability), else nothing.
CMD ["node", "--max-semi-space-size=16", "--import", "./infra/telemetry/register.ts", "api/main.ts"]

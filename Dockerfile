# syntax=docker/dockerfile:1
# svc-gateway as one compiled binary (build.ts) on a small glibc base.
#   docker build -t svc-gateway .
#   docker run --stop-timeout 30 -p 8080:8080 -v svc-data:/data svc-gateway     # prints the bootstrap admin key once
# --stop-timeout: `docker stop` kills after 10 s by default, before the 25 s drain (shutdown.drain_timeout_s) ends.

# --- build: Bun compiles src/ + the libsql addon + drizzle/ migrations into dist/svc ----------
FROM oven/bun:1.4.5 AS build
WORKDIR /src
# Dependencies first: this layer is reused until package.json or bun.lock change.
COPY package.json bun.lock ./
RUN bun install --frozen-lockfile
COPY . .
RUN bun run build

# --- runtime: Debian, not Alpine: the binary and libsql's -gnu addon are glibc-linked -------
FROM debian:bookworm-slim
# No ca-certificates needed (Bun ships its own root store) and no curl: bash does the healthcheck.
# The group first, with the same id: a group useradd makes for the user gets a system gid (999), not the 10001
# that USER names, leaving files in /data with an orphan group.
RUN groupadd --system --gid 10001 svc \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin svc \
 && install -d -o svc -g svc /data
COPY --from=build /src/dist/svc /usr/local/bin/svc

# A named volume inherits /data's ownership; a bind mount must be writable by uid 10001.
VOLUME /data
WORKDIR /data
ENV PORT=8080 \
    DATABASE_URL=file:/data/svc.db
EXPOSE 8080
USER 10001:10001

# GET /readyz (the database answers) over bash's /dev/tcp; any status but 200 is unhealthy.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/${PORT:-8080} && printf 'GET /readyz HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n' >&3 && read -r -t 4 status <&3 && [[ $status == *' 200 '* ]]"]

# The binary is PID 1: it handles SIGTERM itself (stop accepting, drain, close) and spawns no
# child processes, so no init shim is needed.
ENTRYPOINT ["/usr/local/bin/svc"]
CMD ["serve"]

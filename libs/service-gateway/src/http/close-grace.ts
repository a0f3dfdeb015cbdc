import type { Server, Socket } from 'node:net';

/** How long requests in flight may finish once the gateway closes (well inside a process's 25 s stop grace). */
export const CLOSE_GRACE_MS = 10_000;

export interface CloseGraceLogger {
  warn(context: Record<string, unknown>, message: string): void;
}

/**
 * Bounds a server's close. `server.close()` waits for every connection to end, and Fastify only
 * reaps idle HTTP/1.1 connections of a plain HTTP server: on the HTTPS server (HTTP/2 with HTTP/1.1
 * for older clients) a connection a client leaves open, or a request that never completes, would
 * hold the close until the process's grace runs out and it exits 1. Every connection is tracked
 * from its TCP accept; `startGrace()`, called as the close begins, destroys those still open after
 * `graceMs` and says how many there were.
 */
export function closeGrace(server: Server, logger: CloseGraceLogger, graceMs = CLOSE_GRACE_MS): { startGrace(): void } {
  const open = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  });
  let started = false;
  return {
    startGrace() {
      if (started) return;
      started = true;
      const timer = setTimeout(() => {
        if (open.size === 0) return;
        logger.warn({ connections: open.size, graceMs }, 'Connections still open when the close grace ran out; cutting them');
        for (const socket of open) socket.destroy();
      }, graceMs);
      timer.unref();
      server.once('close', () => clearTimeout(timer));
    },
  };
}

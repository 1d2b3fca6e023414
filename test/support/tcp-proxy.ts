import { createServer, connect, type Server, type Socket } from "node:net";

/**
 * A loopback TCP proxy in front of a server (PostgreSQL here), to take it away and give it back the
 * way an outage does: cut() drops every open connection and refuses new ones; restore() listens again
 * on the same port.
 */
export interface TcpProxy {
  port: number;
  /**
   * The next COMMIT of a database transaction that sent `marker` (text of one of its statements) reaches the server,
   * which commits it, but its answer never reaches the client: the connection is cut as the COMMIT goes through (an
   * acknowledgement lost in a failover). Resolves once it has happened.
   */
  loseCommitAnswerAfter(marker: string): Promise<void>;
  cut(): Promise<void>;
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(targetPort: number, targetHost = "127.0.0.1"): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0;
  let commitTrap: { marker: string; sprung: () => void } | undefined;

  const listen = async () => {
    const s = createServer((client) => {
      const upstream = connect(targetPort, targetHost);
      for (const socket of [client, upstream]) {
        sockets.add(socket);
        socket.on("close", () => sockets.delete(socket));
        socket.on("error", () => {
          client.destroy();
          upstream.destroy();
        });
      }
      upstream.pipe(client);
      let marked = false;
      client.on("data", (chunk: Buffer) => {
        const trap = commitTrap;
        if (trap) {
          const text = chunk.toString("latin1");
          if (text.includes("BEGIN")) marked = false;
          if (text.includes(trap.marker)) marked = true;
          if (marked && text.includes("COMMIT")) {
            commitTrap = undefined;
            upstream.unpipe(client);
            upstream.end(chunk);
            client.destroy();
            trap.sprung();
            return;
          }
        }
        if (!upstream.write(chunk)) {
          client.pause();
          upstream.once("drain", () => client.resume());
        }
      });
      client.on("end", () => upstream.end());
    });
    await new Promise<void>((resolve, reject) => {
      s.once("error", reject);
      s.listen(port, "127.0.0.1", () => resolve());
    });
    port = (s.address() as { port: number }).port;
    server = s;
  };

  const stop = async () => {
    const s = server;
    server = undefined;
    for (const socket of sockets) socket.destroy();
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  };

  await listen();
  return {
    get port() {
      return port;
    },
    loseCommitAnswerAfter: (marker) => new Promise<void>((sprung) => (commitTrap = { marker, sprung })),
    cut: stop,
    restore: listen,
    close: stop,
  };
}

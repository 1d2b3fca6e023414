import { simpleParser, type ParsedMail } from "mailparser";
import { SMTPServer, type SMTPServerOptions } from "smtp-server";

/**
 * A real SMTP server on loopback (the `smtp-server` package) that keeps what it is given, raw and parsed
 * (mailparser), and can answer as a real one would: a temporary refusal (4xx), a permanent one (5xx), or no
 * STARTTLS. `refuse` is asked for each message's recipient before it is taken.
 */
export interface ReceivedMail {
  envelope: { from: string; to: string[] };
  raw: Buffer;
  parsed: ParsedMail;
}

export interface SmtpFake {
  port: number;
  /** smtp://127.0.0.1:<port>/?tls=off (no STARTTLS on loopback) unless `starttls`. */
  url: string;
  received: ReceivedMail[];
  /** Tries per recipient (accepted or refused). */
  tries: Map<string, number>;
  /** Set to refuse a recipient: return an SMTP code and text (e.g. [451, "try later"]), or null to take it. */
  refuse: (recipient: string, tryNumber: number) => [number, string] | null;
  /**
   * While true, each message's data is read but the server's answer to it is held (as a slow server's would be):
   * `held` counts them. releaseHeld() answers them: a message whose client hung up meanwhile was never accepted
   * (no 250 was sent), so it is dropped, as a real server drops it.
   */
  holding: boolean;
  held: number;
  /** Clients connected now. */
  connected: number;
  releaseHeld(): void;
  close(): Promise<void>;
}

export async function startSmtpFake(options: { starttls?: boolean; auth?: { user: string; pass: string } } = {}): Promise<SmtpFake> {
  const closed = new Set<string>();
  const waiting: (() => void)[] = [];
  const fake: Omit<SmtpFake, "port" | "url" | "close"> = {
    received: [],
    tries: new Map(),
    refuse: () => null,
    holding: false,
    held: 0,
    connected: 0,
    releaseHeld() {
      fake.holding = false;
      for (const release of waiting.splice(0)) release();
    },
  };
  const serverOptions: SMTPServerOptions = {
    secure: false,
    disabledCommands: options.starttls ? [] : ["STARTTLS"],
    hideSTARTTLS: !options.starttls,
    authOptional: !options.auth,
    ...(options.auth ? {} : { disabledCommands: [...(options.starttls ? [] : ["STARTTLS"]), "AUTH"] }),
    onAuth(auth, _session, callback) {
      if (options.auth && auth.username === options.auth.user && auth.password === options.auth.pass) return callback(null, { user: auth.username });
      return callback(Object.assign(new Error("Invalid username or password"), { responseCode: 535 }));
    },
    onRcptTo(address, _session, callback) {
      const n = (fake.tries.get(address.address) ?? 0) + 1;
      fake.tries.set(address.address, n);
      const refusal = fake.refuse(address.address, n);
      if (refusal) return callback(Object.assign(new Error(refusal[1]), { responseCode: refusal[0] }));
      return callback();
    },
    onConnect(_session, callback) {
      fake.connected++;
      callback();
    },
    onClose(session) {
      closed.add(session.id);
      fake.connected--;
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("end", async () => {
        if (fake.holding) {
          fake.held++;
          await new Promise<void>((resolve) => waiting.push(resolve));
        }
        // A client that hung up before the answer never had its message accepted (the server hears of the hang-up
        // on the next turn of the event loop).
        await new Promise((resolve) => setImmediate(resolve));
        if (closed.has(session.id)) return;
        const raw = Buffer.concat(chunks);
        fake.received.push({
          envelope: { from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "", to: session.envelope.rcptTo.map((r) => r.address) },
          raw,
          parsed: await simpleParser(raw),
        });
        callback();
      });
    },
    logger: false,
  };
  const server = new SMTPServer(serverOptions);
  // A connection's error (ECONNRESET when a test kills the gateway mid-message) is the server's `error` event; with
  // no listener it would be thrown in the test's process. A real server logs it and carries on: so does this one.
  server.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code !== "ECONNRESET" && error.code !== "EPIPE") console.error("SMTP fake:", error);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const port = (server.server.address() as { port: number }).port;
  const auth = options.auth ? `${encodeURIComponent(options.auth.user)}:${encodeURIComponent(options.auth.pass)}@` : "";
  return Object.assign(fake, {
    port,
    url: `smtp://${auth}127.0.0.1:${port}/${options.starttls ? "" : "?tls=off"}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  });
}

import { readFileSync } from "node:fs";
import nodemailer from "nodemailer";
import type { MailConfig } from "../../config.ts";

/**
 * The SMTP side: nodemailer (weighed against emailjs and a hand-written client: nodemailer is the one Node
 * library that does STARTTLS, SMTPUTF8, DKIM signing and MIME with inline images, and is actively kept). One
 * pooled transport per process. An answer is sorted into sent, permanent (a 5xx reply: retrying cannot help) or
 * temporary (4xx, connection refused, timeouts, a server without STARTTLS when it is required, a refused login:
 * the operator can fix those, and the message goes once they have). Only a 5xx about the message itself (its
 * recipient or content) is permanent.
 */

export interface OutgoingMail {
  /** The same on every try of one message: a receiver can tell a copy sent again after a crash from a new message. */
  messageId: string;
  from: string;
  to: string;
  replyTo?: string | undefined;
  subject: string;
  text: string;
  html: string;
  /** The merchant's logo, inline (the HTML refers to it as cid:<cid>): no remote images. */
  logo?: { cid: string; bytes: Uint8Array; type: string } | undefined;
}

export type SendOutcome = { sent: true; messageId: string } | { sent: false; permanent: boolean; error: string };

export interface MailTransport {
  send(mail: OutgoingMail): Promise<SendOutcome>;
  close(): void;
}

/** The SMTP server's words, without anything that could carry a credential (nodemailer's errors never include the password; the URL is never passed in). */
function describe(error: unknown): { permanent: boolean; error: string } {
  const e = error as { responseCode?: number; code?: string; response?: string; message?: string };
  const code = typeof e.responseCode === "number" ? e.responseCode : undefined;
  // Only the server's refusal of this message (its recipient or its content) is permanent. A refused login, a server
  // without STARTTLS, a dropped connection are the operator's to fix: temporary, so messages wait for the fix.
  const aboutMessage = e.code === "EENVELOPE" || e.code === "EMESSAGE";
  const permanent = aboutMessage && code !== undefined && code >= 500 && code < 600;
  const words = (e.message ?? e.response ?? String(error)).replace(/[\r\n]+/g, " ").slice(0, 500);
  return { permanent, error: `${code ?? e.code ?? "error"}: ${words}` };
}

export function createSmtpTransport(config: MailConfig): MailTransport | null {
  const smtp = config.smtp;
  if (!smtp) return null;
  const dkim = config.dkim
    ? { domainName: config.dkim.domain, keySelector: config.dkim.selector, privateKey: readFileSync(config.dkim.privateKeyFile, "utf8") }
    : undefined;
  const transporter = nodemailer.createTransport({
    host: smtp.host,
    port: smtp.port,
    secure: smtp.secure,
    // STARTTLS is required unless the URL says ?tls=off (a relay on the same machine or network).
    requireTLS: smtp.requireTls,
    ignoreTLS: !smtp.secure && !smtp.requireTls,
    ...(smtp.user ? { auth: { user: smtp.user, pass: smtp.pass ?? "" } } : {}),
    pool: true,
    maxConnections: 3,
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 30_000,
    ...(dkim ? { dkim } : {}),
    logger: false,
    debug: false,
  });
  return {
    async send(mail) {
      try {
        const info = await transporter.sendMail({
          messageId: mail.messageId,
          from: mail.from,
          to: mail.to,
          ...(mail.replyTo ? { replyTo: mail.replyTo } : {}),
          subject: mail.subject,
          text: mail.text,
          html: mail.html,
          attachments: mail.logo ? [{ filename: `logo.${mail.logo.type.split("/")[1]}`, content: Buffer.from(mail.logo.bytes), contentType: mail.logo.type, cid: mail.logo.cid, contentDisposition: "inline" }] : [],
          // Each address is checked before it gets here; nodemailer still refuses anything that is not one.
          disableFileAccess: true,
          disableUrlAccess: true,
        });
        return { sent: true, messageId: info.messageId };
      } catch (error) {
        return { sent: false, ...describe(error) };
      }
    },
    close: () => transporter.close(),
  };
}

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSmtpFake, type SmtpFake } from "../fakes/smtp.ts";
import { graphql } from "../gql/index.ts";
import { createTestDatabase, type TestDatabase } from "../support/backend.ts";
import { apiClient, paidTransaction } from "../support/gateway.ts";
import { gatewayProcesses, printedTestKey, processEnv } from "../support/process.ts";
import { expectNothingMoreWithin, until } from "../support/wait.ts";

/**
 * A payment completed once is one receipt across kill -9 (issue 38): the gateway dies while the SMTP server has its
 * messages' data but has not yet accepted them (no 250 sent: the server drops them when the client hangs up); a
 * restarted gateway takes the jobs over after their lease and sends each receipt, and each arrives once.
 */
const PaymentMails = graphql(`
  query CrashPaymentMails($reference: String) {
    mailMessages(transaction: $reference) { __typename ... on MailMessagePage { total items { kind status } } ... on Error { code message } }
  }
`);

describe("receipts across a gateway crash", () => {
  let database: TestDatabase;
  let smtp: SmtpFake;
  let env: Record<string, string>;
  const processes = gatewayProcesses();
  const PAYERS = ["crash1@example.com", "crash2@example.com", "crash3@example.com"];
  const arrived = (to: string) => smtp.received.filter((m) => m.envelope.to.includes(to)).length;

  beforeAll(async () => {
    database = await createTestDatabase();
    smtp = await startSmtpFake();
    env = processEnv(database, { SMTP_URL: smtp.url, MAIL_RETRY_SCHEDULE: "200ms", JOB_LEASE_MS: "1000", WEBHOOK_TIMEOUT_MS: "1000" });
  });

  afterAll(async () => {
    await processes.killAll();
    await smtp?.close();
    await database?.drop();
  });

  it("the receipts a dead gateway was sending are sent once by the next one", async () => {
    const first = await processes.start(env);
    const apiKey = await printedTestKey(first);
    smtp.holding = true;
    const references = await Promise.all(PAYERS.map((email, i) => paidTransaction(first.url, apiKey, { amount: 1000 + i, email })));
    await until(() => smtp.held, (n) => n >= 1, 30_000);
    first.child.kill("SIGKILL");
    await first.exited;
    // The server sees the dead client's connections close before it would have answered them.
    await until(() => smtp.connected, (n) => n === 0);
    smtp.releaseHeld();
    expect(smtp.received).toHaveLength(0);

    const second = await processes.start(env);
    for (const payer of PAYERS) await until(() => arrived(payer), (n) => n >= 1, 60_000);
    await expectNothingMoreWithin(2000, () => PAYERS.map(arrived).join(","));
    for (const payer of PAYERS) expect(arrived(payer), `${payer}: ${JSON.stringify(smtp.received.map((m) => [m.envelope.to, m.parsed.messageId, m.parsed.date, m.parsed.subject]))} held ${smtp.held}`).toBe(1);

    // One message per payment on record, sent.
    for (const reference of references) {
      const res = await apiClient(second.url, apiKey).graphql(PaymentMails, { reference });
      expect(res.body.data?.mailMessages, res.text).toEqual({ __typename: "MailMessagePage", total: 1, items: [{ kind: "payment_receipt", status: "sent" }] });
    }
  });
});

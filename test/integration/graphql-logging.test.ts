import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.ts";
import { apiClient, startTestGateway, type TestGateway, type TestMerchant } from "../support/gateway.ts";

/**
 * Issue 21, item 4: a client's GraphQL mistakes are logged at info or debug, with the request id and a
 * message; only an unexpected failure is an `error` line. Read from the lines the gateway really writes.
 */
interface Line {
  level: number;
  msg?: string;
  requestId?: string;
  code?: string;
  codes?: unknown[];
  err?: { message: string; stack?: string };
  [key: string]: unknown;
}

const INFO = 30;
const ERROR = 50;

describe("GraphQL error logging", () => {
  let gw: TestGateway;
  let merchant: TestMerchant;
  const lines: Line[] = [];

  beforeAll(async () => {
    gw = await startTestGateway({
      env: { RATE_LIMIT_ENABLED: "false" },
      logger: createLogger("debug", { write: (line) => void lines.push(JSON.parse(line) as Line) }),
    });
    merchant = await gw.createMerchant();
  });
  afterAll(() => gw?.close());

  /** Sends a GraphQL document with its own request id; answers the log lines written for it (its request line aside). */
  async function send(query: string, variables?: Record<string, unknown>) {
    const requestId = `req-${randomUUID()}`;
    const res = await apiClient(gw.url, merchant.testKey).post("/graphql", { query, variables }, { "x-request-id": requestId });
    const own = lines.filter((line) => line.requestId === requestId && line.msg !== "request completed");
    return { res, own, requestId };
  }

  it("a bad argument (a cursor that is not one) is one info line with the request id and the message, not an error line", async () => {
    const { res, own } = await send(`{ transactions(first: 5, after: "not-a-cursor") { totalCount } }`);
    expect(res.body.errors[0].extensions.code).toBe("validation_failed");
    const problems = own.filter((line) => line.level >= INFO);
    expect(problems).toEqual([
      expect.objectContaining({ level: INFO, code: "validation_failed", msg: "GraphQL client error: after: is not a valid cursor; pass a cursor from pageInfo or an edge" }),
    ]);
  });

  it("a typed ValidationError result and a request refused before execution are debug lines with a message", async () => {
    const typed = await send(`mutation { createCustomer(input: { email: "not-an-email" }) { __typename ... on Error { code } } }`);
    expect(typed.res.body.data.createCustomer).toEqual({ __typename: "ValidationError", code: "validation_failed" });
    expect(typed.own.filter((l) => l.level >= INFO)).toEqual([]);
    expect(typed.own).toContainEqual(expect.objectContaining({ level: 20, code: "validation_failed", msg: "GraphQL error result: email: must be a valid e-mail address" }));

    const invalid = await send(`mutation($i: CreateCustomerInput!) { createCustomer(input: $i) { __typename } }`, { i: { email: 5, secret: "sk_test_echo" } });
    expect(invalid.res.status).toBe(400);
    expect(invalid.own.filter((l) => l.level >= INFO)).toEqual([]);
    const refused = invalid.own.find((l) => l.msg?.startsWith("GraphQL request refused: "));
    expect(refused).toMatchObject({ level: 20 });
    expect(JSON.stringify(refused)).not.toContain("sk_test_echo");

    const unknownField = await send(`{ nope }`);
    expect(unknownField.own).toContainEqual(expect.objectContaining({ level: 20, codes: ["GRAPHQL_VALIDATION_FAILED"], msg: expect.stringContaining('Cannot query field "nope"') }));
  });

  it("an unexpected failure is one error line with the request id, a message and the stack; the client sees it masked", async () => {
    // A channel whose stored credentials cannot be decrypted (corrupted at rest): nothing a client did.
    const channel = await apiClient(gw.url, merchant.testKey).post("/api/payment-channels/create", { name: "Sandbox", provider: "sandbox" });
    await gw.gateway.db.prisma.paymentChannel.update({ where: { id: channel.body.channel.id }, data: { configEncrypted: "corrupted" } });
    const { res, own, requestId } = await send(
      `mutation($id: Int!) { simulateC2b(input: { paymentChannelId: $id, amount: 1000, phoneNumber: "254708374149", reference: "ACC-1" }) { __typename } }`,
      { id: channel.body.channel.id },
    );
    expect(res.body.errors[0].message).toBe("Unexpected error.");
    const errors = own.filter((line) => line.level >= ERROR);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ requestId, msg: "GraphQL operation failed unexpectedly: Unrecognised encrypted value", err: { message: "Unrecognised encrypted value" } });
    expect(errors[0]!.err!.stack).toContain("decrypt");
  });

  it("no line is a bare argument list ({\"0\": ...}) and every GraphQL line at info or above names its request", async () => {
    expect(lines.filter((line) => "0" in line)).toEqual([]);
    const graphqlLines = lines.filter((line) => line.level >= INFO && /GraphQL/.test(line.msg ?? ""));
    expect(graphqlLines.length).toBeGreaterThan(0);
    expect(graphqlLines.filter((line) => !line.requestId)).toEqual([]);
  });
});

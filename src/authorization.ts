import type { Principal, UserRole } from "./auth.ts";
import type { KeyMode } from "./security/api-keys.ts";

/**
 * The one authorization table: which principal (an API key or a signed-in user, each with a role) may use which
 * permission in which mode, and which permission each GraphQL root field needs. The schema's auth scopes are
 * made from it (src/graphql/authorization-plugin.ts), so every query, mutation and subscription, over HTTP, SSE
 * or WebSocket, and every REST route mapped onto them, is decided here; docs/dashboard.md's table is printed from it
 * (test/unit/authorization-table.test.ts keeps the two equal).
 */

export type PrincipalKind = `${"key" | "user"}:${UserRole}`;
export const PRINCIPAL_KINDS: readonly PrincipalKind[] = ["key:owner", "key:developer", "key:viewer", "user:owner", "user:developer", "user:viewer"];

const BOTH: readonly KeyMode[] = ["test", "live"];
const TEST: readonly KeyMode[] = ["test"];

export type Permission = "read" | "write" | "money_out" | "payer_messages" | "provider_calls" | "api_keys" | "channel_credentials" | "go_live" | "signed_in_owner" | "own_account";

interface PermissionRule {
  /** What the permission is for, as the docs' table (docs/dashboard.md) says it. */
  summary: string;
  /** The modes each principal kind may use it in; a kind not listed may not use it at all. */
  allows: Partial<Record<PrincipalKind, readonly KeyMode[]>>;
}

export const PERMISSIONS: Record<Permission, PermissionRule> = {
  read: {
    summary: "Read the merchant's data of the caller's mode",
    allows: { "key:owner": BOTH, "key:developer": BOTH, "key:viewer": BOTH, "user:owner": BOTH, "user:developer": BOTH, "user:viewer": BOTH },
  },
  write: {
    summary: "Change the merchant's data of the caller's mode (payments, customers, refunds, links, webhooks)",
    allows: { "key:owner": BOTH, "key:developer": TEST, "user:owner": BOTH, "user:developer": TEST },
  },
  money_out: {
    summary: "Send money out of the balance, and reconcile it",
    allows: { "key:owner": BOTH, "user:owner": BOTH },
  },
  payer_messages: {
    summary: "E-mail a payer again (a payment's receipt)",
    allows: { "key:owner": BOTH, "user:owner": BOTH },
  },
  provider_calls: {
    summary: "Read what the gateway sent providers and what they answered (scrubbed), for support",
    allows: { "key:owner": BOTH, "key:developer": BOTH, "user:owner": BOTH, "user:developer": BOTH },
  },
  api_keys: {
    summary: "Create and revoke API keys of the caller's mode (a key never makes keys)",
    allows: { "user:owner": BOTH, "user:developer": TEST },
  },
  channel_credentials: {
    summary: "Add a payment channel, or change its name, fee schedule or provider credentials (live ones: a signed-in owner)",
    allows: { "key:owner": TEST, "key:developer": TEST, "user:owner": BOTH, "user:developer": TEST },
  },
  go_live: {
    summary: "Read the go-live checklist (live-mode facts, whatever the caller's mode) and check a channel's credentials with its provider",
    allows: { "key:owner": BOTH, "key:developer": BOTH, "user:owner": BOTH, "user:developer": BOTH },
  },
  signed_in_owner: {
    summary: "What spans both modes or must name its author: the team, the brand, ledger adjustments",
    allows: { "user:owner": BOTH },
  },
  own_account: {
    summary: "The signed-in user's own password and notice e-mails",
    allows: { "user:owner": BOTH, "user:developer": BOTH, "user:viewer": BOTH },
  },
};

/** The permission each root field needs. A root field missing here fails the schema's build. */
export const OPERATIONS: Record<"Query" | "Mutation" | "Subscription", Record<string, Permission>> = {
  Query: {
    apiKeys: "read",
    balance: "read",
    balanceTransactions: "read",
    balanceTransactionsPage: "read",
    brand: "read",
    currentUser: "read",
    customer: "read",
    customers: "read",
    dispute: "read",
    feePreview: "read",
    goLive: "go_live",
    disputes: "read",
    disputesPage: "read",
    invoice: "read",
    invoicesPage: "read",
    mailMessage: "read",
    mailMessages: "read",
    node: "read",
    nodes: "read",
    paymentChannels: "read",
    paymentLink: "read",
    paymentLinks: "read",
    paymentLinksPage: "read",
    paymentStats: "read",
    payout: "read",
    payouts: "read",
    payoutsPage: "read",
    plan: "read",
    plansPage: "read",
    reconciliation: "read",
    reconciliations: "read",
    reconciliationsPage: "read",
    refund: "read",
    refunds: "read",
    refundsPage: "read",
    stkStatus: "read",
    subscription: "read",
    subscriptionsPage: "read",
    testClock: "read",
    transaction: "read",
    transactions: "read",
    transactionsPage: "read",
    users: "signed_in_owner",
    viewer: "read",
    webhookDeliveries: "read",
    webhookEndpoints: "read",
  },
  Mutation: {
    acceptDispute: "write",
    activatePaymentChannel: "write",
    advanceTestClock: "write",
    cancelSubscription: "write",
    changePassword: "own_account",
    changeUserRole: "signed_in_owner",
    checkChannelCredentials: "go_live",
    chargePaymentMethod: "write",
    createAdjustment: "signed_in_owner",
    createApiKey: "api_keys",
    createCustomer: "write",
    createPaymentChannel: "channel_credentials",
    createPaymentLink: "write",
    createPayout: "money_out",
    createPlan: "write",
    createRefund: "write",
    createSubscription: "write",
    createTestClock: "write",
    createUser: "signed_in_owner",
    createWebhookEndpoint: "write",
    deactivatePaymentChannel: "write",
    deactivatePaymentLink: "write",
    deleteTestClock: "write",
    deleteWebhookEndpoint: "write",
    detachPaymentMethod: "write",
    disableUser: "signed_in_owner",
    initializeTransaction: "write",
    registerC2bUrls: "write",
    resendEvent: "write",
    resendReceipt: "payer_messages",
    revokeApiKey: "api_keys",
    rotateWebhookSecret: "write",
    runReconciliation: "money_out",
    sendTestWebhook: "write",
    setDefaultPaymentChannel: "write",
    simulateC2b: "write",
    startStkPush: "write",
    submitDisputeEvidence: "write",
    updateBrand: "signed_in_owner",
    updateNoticePreferences: "own_account",
    updatePaymentChannel: "channel_credentials",
    updateWebhookEndpoint: "write",
    uploadDisputeFile: "write",
  },
  Subscription: {
    disputeEvents: "read",
    invoiceEvents: "read",
    payoutEvents: "read",
    payoutStatusChanged: "read",
    refundEvents: "read",
    subscriptionEvents: "read",
    transactionEvents: "read",
    transactionStatusChanged: "read",
  },
};

/**
 * Fields below the root that need more than the root field that reached them (a viewer reads a transaction, not
 * what its provider was sent). The plugin gives them their scope as it does root fields.
 */
export const RESTRICTED_FIELDS: Record<string, Record<string, Permission>> = {
  Payout: { providerCalls: "provider_calls" },
  Refund: { providerCalls: "provider_calls" },
  Transaction: { providerCalls: "provider_calls" },
};

export function principalKind(principal: Pick<Principal, "userId" | "role">): PrincipalKind {
  return `${principal.userId === null ? "key" : "user"}:${principal.role}`;
}

export function allows(principal: Pick<Principal, "userId" | "role" | "mode"> | null, permission: Permission): boolean {
  if (!principal) return false;
  return PERMISSIONS[permission].allows[principalKind(principal)]?.includes(principal.mode) ?? false;
}

/** The permission a root field (or a restricted field) needs, or undefined for a field the table does not know. */
export function permissionOf(type: string, field: string): Permission | undefined {
  return (OPERATIONS as Record<string, Record<string, Permission> | undefined>)[type]?.[field] ?? RESTRICTED_FIELDS[type]?.[field];
}

/** Why a principal may not use a permission, in words its team can act on. */
export function refusal(principal: Principal, permission: Permission): string {
  const isKey = principal.userId === null;
  const who = isKey ? `This API key (${principal.role})` : `Your role (${principal.role})`;
  switch (permission) {
    case "signed_in_owner":
      return isKey ? "An API key cannot do this; a signed-in owner can (the team, the brand and adjustments span both modes)" : `${who} cannot do this; only an owner can`;
    case "own_account":
      return "Only a signed-in user has a password to change; an API key has none";
    case "api_keys":
      if (isKey) return "An API key cannot create or revoke keys; a signed-in owner or developer can, in the dashboard";
      break;
    case "provider_calls":
      return `${who} cannot read provider calls; an owner or developer can`;
    case "go_live":
      return `${who} cannot read the go-live checklist; an owner or developer can`;
    case "channel_credentials":
      if (principal.mode === "live" && (isKey || principal.role === "owner")) return "Live channels' credentials are changed by a signed-in owner, never an API key";
      break;
  }
  if (principal.role === "viewer") return isKey ? "This API key (viewer) can only read" : "Your role (viewer) can only read; ask an owner for the developer or owner role";
  if (principal.role === "developer" && principal.mode === "live" && permission !== "money_out") {
    return isKey ? "This API key (developer) can only read in live mode" : "Your role (developer) can change test-mode data only; ask an owner";
  }
  return `${who} cannot do this; only an owner can`;
}

/** The README's table, printed from the data above. */
export function authorizationTableMarkdown(): string {
  const head = `| permission | what it covers | operations | ${PRINCIPAL_KINDS.map((kind) => kind.replace(":", " ")).join(" | ")} |`;
  const rule = `|${" --- |".repeat(3 + PRINCIPAL_KINDS.length)}`;
  const rows = (Object.keys(PERMISSIONS) as Permission[]).map((permission) => {
    const operations = [
      ...Object.entries(OPERATIONS).flatMap(([, fields]) => Object.entries(fields).filter(([, p]) => p === permission).map(([name]) => name)),
      ...Object.entries(RESTRICTED_FIELDS).flatMap(([type, fields]) => Object.entries(fields).filter(([, p]) => p === permission).map(([name]) => `${type}.${name}`)),
    ]
      .sort()
      .map((name) => `\`${name}\``);
    const cells = PRINCIPAL_KINDS.map((kind) => {
      const modes = PERMISSIONS[permission].allows[kind] ?? [];
      return modes.length === 2 ? "test, live" : modes.length === 1 ? modes[0] : "-";
    });
    return `| \`${permission}\` | ${PERMISSIONS[permission].summary} | ${operations.join(", ")} | ${cells.join(" | ")} |`;
  });
  return [head, rule, ...rows].join("\n");
}

import type { MailMessage } from "../../db/generated/prisma/client.ts";
import { builder } from "../../graphql/builder.ts";
import { businessErrors } from "../../graphql/errors.ts";
import { Transaction } from "../transactions/schema.ts";
import { NOTICE_KINDS } from "./content.ts";

/** E-mails: thin resolvers over services.mail. */

const MailMessageType = builder.objectRef<MailMessage>("MailMessage").implement({
  description:
    "One e-mail: a receipt or invoice to a payer, or a notice to one of the team. Without an SMTP server, test-mode messages are kept here (status kept): the test inbox.",
  fields: (t) => ({
    databaseId: t.exposeInt("id"),
    kind: t.exposeString("kind", { description: `payment_receipt, refund_receipt, invoice, invoice_payment_failed, or a notice: ${NOTICE_KINDS.join(", ")}.` }),
    status: t.exposeString("status", { description: "queued, sent, kept (the test inbox: no SMTP server), skipped (see lastError: no or no valid address, receipts off) or failed (the server refused it for good)." }),
    sender: t.string({ description: "Who it is from: the gateway's MAIL_FROM.", resolve: (_message, _args, ctx) => ctx.services.mail.sender }),
    toAddress: t.exposeString("toAddress", { nullable: true, description: "The recipient, once the message is written." }),
    language: t.exposeString("language", { nullable: true, description: "en or sw." }),
    subject: t.exposeString("subject", { nullable: true }),
    textBody: t.exposeString("textBody", { nullable: true, description: "The plain-text part." }),
    htmlBody: t.exposeString("htmlBody", { nullable: true, description: "The HTML part, as sent (the logo is an inline attachment: cid:)." }),
    attempts: t.exposeInt("attempts", { description: "Tries to hand it to the SMTP server." }),
    lastError: t.exposeString("lastError", { nullable: true, description: "Why it was skipped, or the SMTP server's last refusal." }),
    createdAt: t.expose("createdAt", { type: "DateTime" }),
    sentAt: t.expose("sentAt", { type: "DateTime", nullable: true, description: "When the SMTP server took it (or it was kept in the test inbox)." }),
  }),
});

const MailMessagePage = builder.objectRef<{ items: MailMessage[]; total: number }>("MailMessagePage").implement({
  fields: (t) => ({
    items: t.field({ type: [MailMessageType], resolve: (page) => page.items }),
    total: t.exposeInt("total", { description: "Number of matching messages." }),
  }),
});

builder.queryFields((t) => ({
  mailMessages: t.field({
    type: MailMessagePage,
    description: "The merchant's e-mails of the caller's mode, newest first: the test inbox (status: kept), or one payment's (transaction: its reference).",
    errors: { types: businessErrors },
    args: {
      status: t.arg.string({ required: false }),
      transaction: t.arg.string({ required: false, description: "A payment's reference: its receipts." }),
      first: t.arg.int({ required: false, defaultValue: 20, description: "At most 100." }),
      offset: t.arg.int({ required: false, defaultValue: 0 }),
    },
    resolve: (_root, args, ctx) => ctx.services.mail.list(ctx.principal!, { status: args.status ?? null, transaction: args.transaction ?? null, first: args.first ?? 20, offset: args.offset ?? 0 }),
  }),
  mailMessage: t.field({
    type: MailMessageType,
    errors: { types: businessErrors },
    args: { id: t.arg.int({ required: true }) },
    resolve: (_root, { id }, ctx) => ctx.services.mail.get(ctx.principal!, id),
  }),
}));

builder.mutationFields((t) => ({
  resendReceipt: t.field({
    type: MailMessageType,
    description: "E-mails a completed payment's receipt to its payer again (owners; at most 3 times an hour per payment).",
    errors: { types: businessErrors },
    args: { reference: t.arg.string({ required: true }) },
    resolve: (_root, { reference }, ctx) => ctx.services.mail.resendReceipt(ctx.principal!, reference),
  }),
  updateNoticePreferences: t.field({
    type: ["String"],
    description: `The notices the signed-in user does not want e-mailed (of ${NOTICE_KINDS.join(", ")}); the list given replaces the last.`,
    errors: { types: businessErrors },
    args: { optOuts: t.arg.stringList({ required: true }) },
    resolve: (_root, { optOuts }, ctx) => ctx.services.mail.setOptOuts(ctx.principal!, optOuts),
  }),
}));

builder.prismaObjectField("User", "mailOptOuts", (t) =>
  t.exposeStringList("mailOptOuts", { description: "The notices this user asked not to be e-mailed." }),
);

builder.objectField(Transaction, "mailMessages", (t) =>
  t.field({
    type: [MailMessageType],
    description: "The e-mails about this payment (its receipts), newest first: sent, kept, or skipped with the reason (an e-mail that is not an address).",
    resolve: async (transaction, _args, ctx) => (await ctx.services.mail.list(ctx.principal!, { transaction: transaction.reference, status: null, first: 50, offset: 0 })).items,
  }),
);

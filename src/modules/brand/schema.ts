import { builder } from "../../graphql/builder.ts";
import { businessErrors } from "../../graphql/errors.ts";
import type { BrandSettings } from "./service.ts";

/** Brand settings: thin resolvers over services.brand. The logo's bytes are uploaded with PUT /v1/brand/logo. */

const BrandType = builder.objectRef<BrandSettings>("Brand").implement({
  description: "How the merchant appears on its payers' pages (hosted checkout, payment links), in both modes. Null: the page's default.",
  fields: (t) => ({
    displayName: t.exposeString("displayName", { nullable: true, description: "The name payers see; null: the merchant's name (merchantName)." }),
    merchantName: t.exposeString("merchantName", { description: "The merchant's own name, shown while displayName is null." }),
    accentColor: t.exposeString("accentColor", { nullable: true, description: "#rrggbb for buttons and links, with at least 4.5:1 contrast against white text." }),
    supportEmail: t.exposeString("supportEmail", { nullable: true, description: "Where payers can ask about a payment." }),
    logoUrl: t.exposeString("logoUrl", { nullable: true, description: "The logo's same-origin path (/brand/<merchant>/logo/<sha256>); it changes with the logo." }),
    logoType: t.exposeString("logoType", { nullable: true, description: "image/png, image/jpeg or image/webp, as read from the bytes." }),
    logoSize: t.exposeInt("logoSize", { nullable: true, description: "The logo's size in bytes." }),
    receiptsEnabled: t.exposeBoolean("receiptsEnabled", { description: "Whether payers are e-mailed a receipt for each payment and refund (and subscription invoices)." }),
    replyTo: t.exposeString("replyTo", { nullable: true, description: "Where payers' replies to those e-mails go; null: the support e-mail." }),
    website: t.exposeString("website", { nullable: true, description: "The shop's website (https): the receipt and the checkout's success page link back to it." }),
    timezone: t.exposeString("timezone", { description: "The merchant's time zone (IANA name): dates on receipts and the daily summary's day." }),
    language: t.exposeString("language", { description: "en or sw: the team's notices, and payers' e-mails when the payer chose no language." }),
    updatedAt: t.expose("updatedAt", { type: "DateTime", nullable: true }),
  }),
});

const UpdateBrandInput = builder.inputType("UpdateBrandInput", {
  description: "A field left out is unchanged; null or an empty string clears it (the page's default returns).",
  fields: (t) => ({
    merchantName: t.string({ required: false, description: "The merchant's own name (renames it; cannot be cleared): 1 to 200 characters, no control characters." }),
    displayName: t.string({ required: false, description: "1 to 100 characters, no control characters." }),
    accentColor: t.string({ required: false, description: "#rrggbb with a contrast ratio of at least 4.5:1 against white (the page puts white text on it)." }),
    supportEmail: t.string({ required: false, description: "A valid e-mail address." }),
    removeLogo: t.boolean({ required: false, description: "True: the logo is deleted. A logo is uploaded with PUT /v1/brand/logo." }),
    receiptsEnabled: t.boolean({ required: false, description: "False: payers get no e-mail from the gateway (receipts, invoices)." }),
    replyTo: t.string({ required: false, description: "A valid e-mail address for payers' replies." }),
    website: t.string({ required: false, description: "An https:// address." }),
    timezone: t.string({ required: false, description: "An IANA time zone name, e.g. Africa/Nairobi." }),
    language: t.string({ required: false, description: "en or sw." }),
  }),
});

builder.queryField("brand", (t) =>
  t.field({
    type: BrandType,
    description: "The merchant's brand settings. Every user of the merchant and its API keys read them.",
    resolve: (_root, _args, ctx) => ctx.services.brand.get(ctx.principal!),
  }),
);

builder.mutationField("updateBrand", (t) =>
  t.field({
    type: BrandType,
    description: "Changes the merchant's name, display name, accent colour or support e-mail, or removes its logo. Signed-in owners only (never an API key: the brand spans both modes).",
    errors: { types: businessErrors },
    args: { input: t.arg({ type: UpdateBrandInput, required: true }) },
    resolve: (_root, { input }, ctx) => ctx.services.brand.update(ctx.principal!, input),
  }),
);

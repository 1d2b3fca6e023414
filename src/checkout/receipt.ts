import type { FastifyInstance } from "fastify";
import { NotFoundError } from "../errors.ts";
import { renderReceiptPage } from "../modules/mail/receipt-page.ts";
import type { Services } from "../services.ts";
import { chooseLanguage } from "./i18n.ts";
import { sendPayerPage } from "./layout.ts";

/**
 * GET /receipts/:token, a completed payment's public receipt (linked from the payer's e-mail and the checkout's
 * success page). The token (128 random bits) is the payer's credential, as the reference is for the checkout; the
 * page is printable and in the payer's language (?lang=, else the browser's).
 */
export function registerReceiptRoutes(app: FastifyInstance, services: Pick<Services, "mail">) {
  app.get<{ Params: { token: string }; Querystring: { lang?: string } }>("/receipts/:token", { config: { auth: "none", rateLimit: "none" } }, async (request, reply) => {
    const { lang } = chooseLanguage(request.query.lang, request.headers["accept-language"]);
    const view = await services.mail.receiptView(request.params.token);
    if (!view) throw new NotFoundError("Receipt");
    const switchHref = `/receipts/${encodeURIComponent(request.params.token)}?lang=${lang === "en" ? "sw" : "en"}`;
    return sendPayerPage(reply, 200, (nonce) => renderReceiptPage({ ...view, lang, nonce, switchHref }));
  });
}

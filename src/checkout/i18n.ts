/**
 * The payer's pages (hosted checkout, payment links) in English and Swahili: one catalogue, every string the
 * pages show. The language comes from `?lang=` (the switch on the page) or else the browser's Accept-Language.
 * Swahili follows M-Pesa's own wording where it has one ("Lipa", "Weka namba ya simu", "Angalia simu yako").
 */

export const LANGUAGES = ["en", "sw"] as const;
export type Language = (typeof LANGUAGES)[number];

const isLanguage = (value: unknown): value is Language => typeof value === "string" && (LANGUAGES as readonly string[]).includes(value);

/**
 * `?lang=sw` wins (the payer chose); else the Accept-Language entry with the highest q-value that we speak
 * (`sw-KE` counts as `sw`; `q=0` means "not this one"); else English.
 */
export function chooseLanguage(queryLang: unknown, acceptLanguage: string | undefined): { lang: Language; chosen: boolean } {
  if (isLanguage(queryLang)) return { lang: queryLang, chosen: true };
  const ranked = (acceptLanguage ?? "")
    .slice(0, 1000)
    .split(",")
    .map((entry, index) => {
      const [tag = "", ...params] = entry.trim().split(";");
      const q = params.map((p) => /^\s*q\s*=\s*([0-9.]+)\s*$/i.exec(p)).find(Boolean);
      return { primary: tag.trim().toLowerCase().split("-")[0], q: q ? Number(q[1]) : 1, index };
    })
    .filter((entry) => entry.q > 0 && Number.isFinite(entry.q))
    // Highest q first; equal q keeps the header's order.
    .sort((a, b) => b.q - a.q || a.index - b.index);
  const match = ranked.find((entry) => isLanguage(entry.primary));
  return { lang: match ? (match.primary as Language) : "en", chosen: false };
}

const en = {
  // Both pages
  testMode: "Test mode: no real money moves",
  languageSwitch: "Kiswahili",
  support: "Questions about this payment?",
  logoAlt: "{name} logo",
  // Checkout
  checkoutTitle: "Checkout",
  notFoundTitle: "Payment not found",
  notFoundText: "This payment link is not valid.",
  payWith: "Pay with",
  methodMpesa: "M-Pesa",
  methodCard: "Card",
  cardNumber: "Card number",
  month: "Month",
  year: "Year",
  cvc: "CVC",
  pay: "Pay {amount}",
  saveCard: "Save this card for future payments to {merchant}",
  saveCardRequested: "{merchant} asks to keep this card for future payments. Untick the box if you do not want that.",
  phone: "M-Pesa phone number",
  phoneHint: "For example 0712 345 678. You approve the payment on that phone.",
  payMpesa: "Pay {amount} with M-Pesa",
  testCards:
    "Test cards: 4084 0840 8408 4081 succeeds; 4000 0000 0000 0002 is declined, 4000 0000 0000 9995 has insufficient funds. Any future expiry date and any CVC.",
  testPhones: "Test numbers: 254708374149 pays; 254700001032 is cancelled; 254700000001 has insufficient funds; 254700001037 times out.",
  checkPhone: "Check your phone",
  checkPhoneText: "Enter your M-Pesa PIN on the prompt sent to {phone} to pay {amount}. This page updates by itself.",
  checkPhoneTextNoPhone: "Enter your M-Pesa PIN on the prompt on your phone to pay {amount}. This page updates by itself.",
  completed: "Payment completed. Thank you.",
  failed: "This payment did not go through.",
  failedBecause: "This payment did not go through: {reason}.",
  attemptFailed: "That did not go through: {reason}.",
  attemptFailedNoReason: "That did not go through.",
  attemptsLeft: "You can try {n} more time(s).",
  attemptsLeftOne: "You can try 1 more time.",
  tryAgain: "Try again",
  anotherNumber: "Use another number",
  anotherCard: "Enter another card to try again.",
  expiredTitle: "This payment has expired",
  expiredText: "The time to pay has passed. Ask {merchant} for a new payment link.",
  inProgress: "A payment for this transaction is in progress. This page will refresh shortly.",
  confirming: "We are confirming your payment. This page updates by itself.",
  hostedUnavailable: "The payment page could not be opened. Please try again in a moment.",
  noMethods: "This payment cannot be paid on this page.",
  notConfirmed: "We could not confirm your payment with the provider yet.",
  networkError: "The payment could not be sent. Check your connection and try again.",
  pushPending: "A payment prompt sent to this number is still waiting. Approve or cancel it on your phone, or wait a few minutes for it to expire, then try again.",
  pushLimitPhone: "Too many payment prompts were sent to this number. Try again in {minutes} minute(s), or use another number.",
  pushLimitBusy: "Too many M-Pesa payments are being started here right now. Try again in {minutes} minute(s).",
  returnTo: "Return to {merchant}",
  backTo: "Back to {merchant}",
  receiptReference: "Reference",
  receiptOrder: "Order number",
  receiptMethod: "Paid with",
  receiptDate: "Date",
  viewReceipt: "View or print your receipt",
  // Payment links
  linkTitle: "Pay {merchant}",
  linkTitleNotFound: "Payment link",
  anyAmount: "Pay any amount",
  amountLabel: "Amount ({currency})",
  atLeast: "At least {amount}",
  email: "Your e-mail",
  emailHintMpesa: "Optional with M-Pesa: give it to get your receipt by e-mail.",
  emailHintCard: "Needed to pay by card. Your receipt is sent here.",
  continue: "Continue to payment",
  payMpesaAny: "Pay with M-Pesa",
  badEmail: "Enter a valid e-mail address.",
  emailRequiredCard: "Enter your e-mail: it is needed to pay by card (or choose M-Pesa).",
  badPhone: "Enter a valid M-Pesa phone number, for example 0712 345 678.",
  mpesaWholeAmount: "Amount: M-Pesa takes whole amounts only (no cents). Round it, or pay by card.",
  amountMissing: "Amount: enter the amount to pay",
  amountFormat: "Amount: enter a number such as {example}",
  amountSeparator: "Amount: use a point for decimals and commas only between thousands, e.g. {example}",
  amountTooSmall: "Amount: must be at least {amount}",
  linkNotFoundTitle: "Payment link not found",
  linkNotFoundText: "This payment link is not valid. Check the link you were given.",
  linkInactiveTitle: "This link is no longer active",
  linkInactiveText: "The merchant has turned this payment link off. Ask them for a new one.",
  linkExpiredTitle: "This link has expired",
  linkExpiredText: "The time to pay through this link has passed. Ask the merchant for a new one.",
  linkPaidTitle: "This link has been paid",
  linkPaidText: "This payment has already been made. Thank you.",
  linkBusyTitle: "Another payment is being set up",
  linkBusyText: "Someone is paying through this link right now. Try again in a moment.",
  linkBeingPaidTitle: "This link is being paid",
  linkBeingPaidText: "Someone else is paying through this link right now. If their payment does not go through, the link can be paid again: reload this page in a few minutes.",
};

export type Messages = typeof en;

const sw: Messages = {
  testMode: "Hali ya majaribio: hakuna pesa halisi inayotumwa",
  languageSwitch: "English",
  support: "Una maswali kuhusu malipo haya?",
  logoAlt: "Nembo ya {name}",
  checkoutTitle: "Malipo",
  notFoundTitle: "Malipo hayajapatikana",
  notFoundText: "Kiungo hiki cha malipo si sahihi.",
  payWith: "Lipa kwa",
  methodMpesa: "M-Pesa",
  methodCard: "Kadi",
  cardNumber: "Namba ya kadi",
  month: "Mwezi",
  year: "Mwaka",
  cvc: "CVC",
  pay: "Lipa {amount}",
  saveCard: "Hifadhi kadi hii kwa malipo yajayo kwa {merchant}",
  saveCardRequested: "{merchant} anaomba kuhifadhi kadi hii kwa malipo yajayo. Ondoa alama kwenye kisanduku kama hutaki.",
  phone: "Namba ya simu ya M-Pesa",
  phoneHint: "Weka namba ya simu, kwa mfano 0712 345 678. Utakubali malipo kwenye simu hiyo.",
  payMpesa: "Lipa {amount} kwa M-Pesa",
  testCards:
    "Kadi za majaribio: 4084 0840 8408 4081 inafanikiwa; 4000 0000 0000 0002 inakataliwa, 4000 0000 0000 9995 haina salio la kutosha. Tarehe yoyote ya baadaye na CVC yoyote.",
  testPhones:
    "Namba za majaribio: 254708374149 inalipa; 254700001032 inaghairiwa; 254700000001 haina salio la kutosha; 254700001037 muda unaisha.",
  checkPhone: "Angalia simu yako",
  checkPhoneText: "Weka PIN yako ya M-Pesa kwenye ujumbe uliotumwa kwa {phone} ili kulipa {amount}. Ukurasa huu utajisasisha wenyewe.",
  checkPhoneTextNoPhone: "Weka PIN yako ya M-Pesa kwenye ujumbe uliotumwa kwenye simu yako ili kulipa {amount}. Ukurasa huu utajisasisha wenyewe.",
  completed: "Malipo yamekamilika. Asante.",
  failed: "Malipo haya hayakufanikiwa.",
  failedBecause: "Malipo haya hayakufanikiwa: {reason}.",
  attemptFailed: "Jaribio hilo halikufanikiwa: {reason}.",
  attemptFailedNoReason: "Jaribio hilo halikufanikiwa.",
  attemptsLeft: "Unaweza kujaribu mara {n} zaidi.",
  attemptsLeftOne: "Unaweza kujaribu mara 1 zaidi.",
  tryAgain: "Jaribu tena",
  anotherNumber: "Tumia namba nyingine",
  anotherCard: "Weka kadi nyingine ujaribu tena.",
  expiredTitle: "Muda wa malipo haya umekwisha",
  expiredText: "Muda wa kulipa umepita. Mwombe {merchant} kiungo kipya cha malipo.",
  inProgress: "Malipo mengine ya muamala huu yanaendelea. Ukurasa huu utajisasisha hivi punde.",
  confirming: "Tunathibitisha malipo yako. Ukurasa huu utajisasisha wenyewe.",
  hostedUnavailable: "Ukurasa wa malipo haukuweza kufunguliwa. Tafadhali jaribu tena baada ya muda mfupi.",
  noMethods: "Malipo haya hayawezi kulipwa kwenye ukurasa huu.",
  notConfirmed: "Bado hatujaweza kuthibitisha malipo yako na mtoa huduma.",
  networkError: "Malipo hayakuweza kutumwa. Angalia mtandao wako kisha ujaribu tena.",
  pushPending: "Ombi la malipo lililotumwa kwa namba hii bado linasubiri. Likubali au ulighairi kwenye simu yako, au subiri dakika chache muda wake uishe, kisha ujaribu tena.",
  pushLimitPhone: "Maombi mengi mno ya malipo yametumwa kwa namba hii. Jaribu tena baada ya dakika {minutes}, au tumia namba nyingine.",
  pushLimitBusy: "Malipo mengi mno ya M-Pesa yanaanzishwa hapa sasa hivi. Jaribu tena baada ya dakika {minutes}.",
  returnTo: "Rudi kwa {merchant}",
  backTo: "Rudi kwa {merchant}",
  receiptReference: "Kumbukumbu",
  receiptOrder: "Namba ya oda",
  receiptMethod: "Imelipwa kwa",
  receiptDate: "Tarehe",
  viewReceipt: "Tazama au chapisha risiti yako",
  linkTitle: "Lipa {merchant}",
  linkTitleNotFound: "Kiungo cha malipo",
  anyAmount: "Lipa kiasi chochote",
  amountLabel: "Kiasi ({currency})",
  atLeast: "Angalau {amount}",
  email: "Barua pepe yako",
  emailHintMpesa: "Si lazima kwa M-Pesa: iweke ili upate risiti yako kwa barua pepe.",
  emailHintCard: "Inahitajika kulipa kwa kadi. Risiti yako itatumwa hapa.",
  continue: "Endelea kulipa",
  payMpesaAny: "Lipa kwa M-Pesa",
  badEmail: "Weka barua pepe sahihi.",
  emailRequiredCard: "Weka barua pepe yako: inahitajika kulipa kwa kadi (au chagua M-Pesa).",
  badPhone: "Weka namba ya simu ya M-Pesa iliyo sahihi, kwa mfano 0712 345 678.",
  mpesaWholeAmount: "Kiasi: M-Pesa inapokea kiasi kamili tu (bila senti). Kizungushe, au lipa kwa kadi.",
  amountMissing: "Kiasi: weka kiasi cha kulipa",
  amountFormat: "Kiasi: weka namba kama {example}",
  amountSeparator: "Kiasi: tumia nukta kwa desimali na koma kati ya maelfu tu, kwa mfano {example}",
  amountTooSmall: "Kiasi: lazima kiwe angalau {amount}",
  linkNotFoundTitle: "Kiungo cha malipo hakijapatikana",
  linkNotFoundText: "Kiungo hiki cha malipo si sahihi. Angalia kiungo ulichopewa.",
  linkInactiveTitle: "Kiungo hiki hakitumiki tena",
  linkInactiveText: "Mfanyabiashara amezima kiungo hiki cha malipo. Mwombe kipya.",
  linkExpiredTitle: "Muda wa kiungo hiki umekwisha",
  linkExpiredText: "Muda wa kulipa kupitia kiungo hiki umepita. Mwombe mfanyabiashara kiungo kipya.",
  linkPaidTitle: "Kiungo hiki kimeshalipiwa",
  linkPaidText: "Malipo haya yameshafanyika. Asante.",
  linkBusyTitle: "Malipo mengine yanaandaliwa",
  linkBusyText: "Mtu mwingine analipa kupitia kiungo hiki sasa hivi. Jaribu tena baada ya muda mfupi.",
  linkBeingPaidTitle: "Kiungo hiki kinalipiwa",
  linkBeingPaidText: "Mtu mwingine analipa kupitia kiungo hiki sasa hivi. Malipo yake yasipofanikiwa, kiungo kitaweza kulipiwa tena: pakia upya ukurasa huu baada ya dakika chache.",
};

/**
 * Provider outcome codes in the payer's words. English shows the provider's own reason (it is already
 * English); Swahili uses these where the code is known, the provider's reason otherwise.
 */
const swReasons: Record<string, string> = {
  card_declined: "kadi imekataliwa na benki iliyoitoa",
  insufficient_funds: "salio halitoshi",
  expired_card: "muda wa kadi umekwisha",
  processing_error: "hitilafu ilitokea wakati wa kushughulikia kadi",
  "1": "salio lako la M-Pesa halitoshi",
  "1032": "ulighairi ombi la malipo kwenye simu yako",
  "1037": "simu yako haikupatikana kwa wakati",
  "2001": "PIN uliyoweka si sahihi",
};

/**
 * The gateway's error messages are English ("card_number: is not a valid card number"): in Swahili, the field
 * the message names in the payer's words, or by the answer's HTTP status.
 */
const swErrors: Record<string, string> = {
  card_number: "Namba ya kadi si sahihi. Iangalie kisha ujaribu tena.",
  expiry_month: "Mwezi wa kuisha kwa kadi si sahihi.",
  expiry_year: "Mwaka wa kuisha kwa kadi si sahihi.",
  cvc: "CVC si sahihi.",
  phone: "Weka namba ya simu ya M-Pesa iliyo sahihi, kwa mfano 0712 345 678.",
  "400": "Angalia taarifa ulizoweka kisha ujaribu tena.",
  "402": "Malipo yamekataliwa.",
  "403": "Malipo haya hayawezi kulipwa kwa njia hii.",
  "429": "Majaribio ni mengi mno. Subiri kidogo kisha ujaribu tena.",
  other: "Malipo hayakuweza kukamilika sasa hivi. Jaribu tena baada ya muda mfupi.",
};

/** `errors` empty: the gateway's own (English) message is shown as it is. */
export const catalogues: Record<Language, { messages: Messages; reasons: Record<string, string>; errors: Record<string, string> }> = {
  en: { messages: en, reasons: {}, errors: {} },
  sw: { messages: sw, reasons: swReasons, errors: swErrors },
};

/** A message with its `{name}` placeholders filled in (the values are plain text; the caller escapes for HTML). */
export function format(template: string, values: Record<string, string | number> = {}): string {
  return template.replace(/\{(\w+)\}/g, (whole, name: string) => (name in values ? String(values[name]) : whole));
}

/** The reason to show for a failed attempt: the catalogue's words for a known code, else the provider's. */
export function reasonText(lang: Language, code: string | null, reason: string | null): string | null {
  // Without its own full stop: the sentence it goes into has one.
  return ((code !== null ? catalogues[lang].reasons[code] : undefined) ?? reason)?.replace(/\.+$/, "") ?? null;
}

/** `path` with `lang` remembered in its query (only when the payer chose one with the switch). */
export function withLang(path: string, lang: Language, chosen: boolean): string {
  if (!chosen) return path;
  return `${path}${path.includes("?") ? "&" : "?"}lang=${lang}`;
}

import type { CheckoutAttemptView, CheckoutPageData, CheckoutStatus } from "./page-data.ts";

type Method = "mpesa" | "card";

/** A JSON answer of the checkout's POST endpoints (/pay, /mpesa), as far as the script reads it. */
interface Answer {
  status?: string;
  message?: string;
  code?: string;
  attempt?: CheckoutAttemptView | null;
}

/**
 * The checkout page's one script, run by the response's CSP nonce (src/checkout/page.ts writes it into the page,
 * called with the page's strings and state). Card: POST /pay. M-Pesa: POST /mpesa, then GET /status every 2 s
 * while the attempt is pending. Every answer that is not a plain success is drawn from /status, so the page shows
 * what the gateway recorded (e.g. a card declined with tries left keeps the form; at the limit the payment's final
 * state). If /status cannot be read, the page reloads instead.
 */
export function startCheckout(data: CheckoutPageData): void {
  const t = data.t;
  const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T | null;
  // Always on a page that runs this script (page.ts renders them with it).
  const result = $("result")!, left = $("attempts-left")!, waiting = $("waiting")!, retry = $("retry")!;
  const methods = $<HTMLFieldSetElement>("methods");
  const panels: Record<Method, HTMLElement | null> = { mpesa: $("mpesa-panel"), card: $("card-panel") };
  const saveBox = $<HTMLInputElement>("save-card");
  const cardForm = $<HTMLFormElement>("pay"), mpesaForm = $<HTMLFormElement>("mpesa"), phoneInput = $<HTMLInputElement>("phone");
  const base = location.pathname.replace(/\/$/, "").replace(/\/return$/, "");
  const fill = (text: string, values: Record<string, string | number | undefined>) =>
    text.replace(/\{(\w+)\}/g, (whole, name: string) => (name in values ? String(values[name]) : whole));
  let timer: ReturnType<typeof setTimeout> | null = null;
  let lastPhone = "";

  const say = (text: string, kind?: string) => {
    result.className = kind || "";
    result.textContent = text;
  };
  const stop = () => {
    if (timer) clearTimeout(timer);
    timer = null;
  };
  const buttons = (enabled: boolean) =>
    document.querySelectorAll<HTMLButtonElement>("form button").forEach((b) => {
      b.disabled = !enabled;
    });
  const reasonOf = (a: { code?: string | null; reason?: string | null } | null | undefined) =>
    ((a && a.code != null && data.reasons[a.code]) || (a && a.reason) || "").replace(/\.+$/, "") || null;
  // The gateway's English message, or in Swahili the catalogue's words for the field it names (or the status).
  const errorText = (status: number, message: string | undefined) => {
    const field = /^(\w+):/.exec(message || "");
    return (field && data.errors[field[1]!]) || data.errors[String(status)] || data.errors.other || message || t.networkError;
  };

  function chooseMethod(method: Method) {
    retry.hidden = true;
    for (const [name, panel] of Object.entries(panels)) if (panel) panel.hidden = name !== method;
    if (methods) {
      methods.hidden = false;
      methods.querySelector<HTMLInputElement>('input[value="' + method + '"]')!.checked = true;
    }
  }
  function hideAll() {
    for (const panel of Object.values(panels)) if (panel) panel.hidden = true;
    if (methods) methods.hidden = true;
    retry.hidden = true;
    waiting.hidden = true;
  }
  // Completed, failed for good or expired: no form any more, and the way back to the merchant.
  function settle(text: string, kind: string) {
    stop();
    for (const el of [panels.mpesa, panels.card, methods, retry, waiting]) if (el) el.remove();
    left.textContent = "";
    say(text, kind);
    const back = $<HTMLAnchorElement>("return");
    if (back) back.hidden = false;
    return back;
  }

  async function readStatus(): Promise<CheckoutStatus | null> {
    try {
      const response = await fetch(base + "/status", { cache: "no-store" });
      const answer = (await response.json()) as CheckoutStatus;
      return response.ok && typeof answer.status === "string" ? answer : null;
    } catch {
      return null;
    }
  }
  function follow(delay: number) {
    stop();
    timer = setTimeout(async () => {
      const status = await readStatus();
      if (status) render(status);
      else location.reload();
    }, delay);
  }

  /** Draws the payment as /status (or /mpesa's 202) tells it. */
  function render(s: CheckoutStatus): void {
    if (s.status === "completed") {
      const back = settle(t.completed, "completed");
      // Back to the merchant's callback_url, with the reference, as Paystack does; the link stays for slow redirects.
      if (back) setTimeout(() => location.assign(back.href), 1500);
      // Else the page comes again from the server, with the receipt's essentials (reference, M-Pesa code or card, date).
      else setTimeout(() => location.reload(), 1500);
      return;
    }
    if (s.status === "failed") {
      if (s.failure_code === "abandoned") return void settle(t.expired, "failed expired");
      const reason = reasonOf({ code: s.failure_code, reason: s.failure_reason });
      return void settle(reason ? fill(t.failedBecause, { reason }) : t.failed, "failed");
    }
    const a = s.attempt;
    if (a && a.status === "pending") {
      hideAll();
      left.textContent = "";
      if (a.method === "mpesa") {
        const entering = waiting.hidden;
        waiting.hidden = false;
        say(fill(a.detail ? t.checkPhoneText : t.checkPhoneTextNoPhone, { phone: a.detail || "", amount: data.amount }), "pending");
        if (entering) $("waiting-title")!.focus();
      } else {
        say(t.inProgress, "pending");
      }
      return follow(2000);
    }
    stop();
    waiting.hidden = true;
    buttons(true);
    if (a && a.status === "failed") {
      const reason = reasonOf(a);
      say(reason ? fill(t.attemptFailed, { reason }) : t.attemptFailedNoReason, "failed");
      left.textContent = s.attempts_left === 1 ? t.attemptsLeftOne : fill(t.attemptsLeft, { n: s.attempts_left });
      if (a.method === "mpesa" && panels.mpesa) {
        chooseMethod("mpesa");
        panels.mpesa.hidden = true;
        retry.hidden = false;
        $("try-again")!.focus();
      } else if (panels.card) {
        chooseMethod("card");
        left.textContent += " " + t.anotherCard;
        cardForm!.querySelector<HTMLInputElement>('[name="card_number"]')!.focus();
      }
      return;
    }
    chooseMethod(panels.mpesa && !panels.mpesa.hidden ? "mpesa" : panels.card ? "card" : "mpesa");
  }

  /** A refused payment (409: another attempt in flight, or settled; 402: declined): show what the gateway recorded. */
  async function afterRefusal(response: Response, answer: Answer) {
    const status = await readStatus();
    if (status) {
      if (response.status === 409 && status.status === "pending" && !(status.attempt && status.attempt.status === "pending")) {
        // The other payment's claim is not visible as an attempt: say so and look again.
        hideAll();
        say(t.inProgress, "pending");
        return follow(2000);
      }
      return render(status);
    }
    if (response.status === 409) {
      hideAll();
      say(t.inProgress, "pending");
      return void setTimeout(() => location.reload(), 3000);
    }
    settle(errorText(response.status, answer.message), "failed");
  }

  async function send(path: string, body: object): Promise<{ response: Response | null; answer: Answer }> {
    buttons(false);
    try {
      // The page's language goes with every payment: the payer's receipt is written in it.
      const withLang = { ...body, lang: document.documentElement.lang };
      const response = await fetch(base + path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(withLang) });
      return { response, answer: (await response.json()) as Answer };
    } catch {
      return { response: null, answer: { message: t.networkError } };
    }
  }

  if (methods) methods.addEventListener("change", (event) => chooseMethod((event.target as HTMLInputElement).value as Method));

  if (cardForm)
    cardForm.addEventListener("submit", async (event) => {
      event.preventDefault();
      const fields = Object.fromEntries(new FormData(cardForm));
      // The "Save this card" box (when offered) always says what the payer chose, ticked or not.
      const save = saveBox ? { save_payment_method: saveBox.checked } : {};
      const { response, answer } = await send("/pay", { ...fields, expiry_month: Number(fields.expiry_month), expiry_year: Number(fields.expiry_year), ...save });
      if (answer.status === "success") return render({ status: "completed" });
      if (response && (response.status === 402 || response.status === 409)) return afterRefusal(response, answer);
      say(response ? errorText(response.status, answer.message) : t.networkError, "failed");
      buttons(true);
    });

  async function payByMpesa(phone: string) {
    lastPhone = phone;
    const { response, answer } = await send("/mpesa", { phone });
    if (response && response.status === 202) return render({ status: "pending", attempt: answer.attempt });
    // Refused by the prompt limits (or a prompt to this number still waiting): say so, and keep the number form.
    if (response && (response.status === 429 || answer.code === "mpesa_prompt_pending")) {
      buttons(true);
      const minutes = Math.max(1, Math.ceil(Number(response.headers.get("retry-after") || 60) / 60));
      chooseMethod("mpesa");
      return say(answer.code === "mpesa_prompt_pending" ? t.pushPending : fill(answer.code === "mpesa_prompt_limit" ? t.pushLimitPhone : t.pushLimitBusy, { minutes }), "failed");
    }
    if (response && response.status === 409) return afterRefusal(response, answer);
    buttons(true);
    say(response ? errorText(response.status, answer.message) : t.networkError, "failed");
    if (response && response.status === 400) {
      chooseMethod("mpesa");
      phoneInput!.setAttribute("aria-invalid", "true");
      phoneInput!.focus();
    }
  }
  if (mpesaForm)
    mpesaForm.addEventListener("submit", (event) => {
      event.preventDefault();
      phoneInput!.removeAttribute("aria-invalid");
      void payByMpesa(phoneInput!.value.trim());
    });
  if (retry) {
    $("try-again")!.addEventListener("click", () => {
      if (lastPhone) return void payByMpesa(lastPhone);
      chooseMethod("mpesa");
      phoneInput!.focus();
    });
    $("another-number")!.addEventListener("click", () => {
      chooseMethod("mpesa");
      phoneInput!.value = "";
      phoneInput!.focus();
    });
  }
  // Opened (or reloaded) while an attempt is in flight: follow it.
  if (data.polling) follow(2000);
}

import { useEffect, useState } from "preact/hooks";
import { ApiError, gql, mutate } from "../api.ts";
import { graphql } from "../gql/index.ts";
import type { DashboardBrandFragment } from "../gql/graphql.ts";
import { CardForm } from "../forms.tsx";
import { setDisplayTimeZone } from "../format.ts";
import { freshAccessToken, refresh, type Session } from "../session.ts";
import { ErrorNote, Loading, PageHeader, announce, useQuery } from "../ui.tsx";

graphql(`
  fragment DashboardBrand on Brand { displayName merchantName accentColor supportEmail logoUrl logoType logoSize receiptsEnabled replyTo website timezone language }
`);
type Brand = DashboardBrandFragment;
const BRAND = graphql(`query DashboardBrand { brand { ...DashboardBrand } }`);
const UPDATE = graphql(`
  mutation DashboardUpdateBrand($input: UpdateBrandInput!) { updateBrand(input: $input) { __typename ...DashboardError ... on Brand { ...DashboardBrand } } }
`);

/** The gateway's rules, repeated here so the owner sees them while typing (the gateway checks again). */
const MAX_LOGO_BYTES = 256 * 1024;
const MIN_CONTRAST = 4.5;
const COLOR = /^#[0-9a-fA-F]{6}$/;
/** Offered as the time zone is typed (any IANA name will do). */
const COMMON_ZONES = [
  "Africa/Nairobi",
  "Africa/Kampala",
  "Africa/Dar_es_Salaam",
  "Africa/Kigali",
  "Africa/Lagos",
  "Africa/Accra",
  "Africa/Johannesburg",
  "Africa/Cairo",
  "UTC",
  "Europe/London",
  "Europe/Berlin",
  "Asia/Dubai",
  "America/New_York",
];
const LANGUAGES: Record<string, string> = { en: "English", sw: "Kiswahili" };

/** WCAG 2 contrast ratio of #rrggbb against white: the checkout puts white text on the accent colour. */
export function contrastWithWhite(hex: string): number {
  const channel = (i: number) => {
    const c = parseInt(hex.slice(1 + 2 * i, 3 + 2 * i), 16) / 255;
    return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  return 1.05 / (0.2126 * channel(0) + 0.7152 * channel(1) + 0.0722 * channel(2) + 0.05);
}

function contrastMessage(color: string): { ok: boolean; text: string } | null {
  if (color.trim() === "") return null;
  if (!COLOR.test(color.trim())) return { ok: false, text: "Write the colour as #rrggbb, e.g. #1a56db." };
  const ratio = Math.floor(contrastWithWhite(color.trim()) * 100) / 100;
  return ratio >= MIN_CONTRAST
    ? { ok: true, text: `Contrast with white text ${ratio.toFixed(2)}:1: readable (at least ${MIN_CONTRAST}:1 is needed).` }
    : { ok: false, text: `Contrast with white text ${ratio.toFixed(2)}:1: too light, at least ${MIN_CONTRAST}:1 is needed. Choose a darker colour.` };
}

/** PUT /v1/brand/logo with the file's bytes as they are (the gateway reads the type from them), as the signed-in user. */
async function uploadLogo(file: File): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const token = await freshAccessToken();
    if (!token) throw new ApiError("You are signed out", "invalid_token");
    const response = await fetch("/v1/brand/logo", { method: "PUT", headers: { authorization: `Bearer ${token}`, "content-type": file.type || "application/octet-stream" }, body: file });
    if (response.status === 401 && attempt === 0 && (await refresh().catch(() => false))) continue;
    if (response.ok) return;
    const body = (await response.json().catch(() => null)) as { message?: string; code?: string } | null;
    throw new ApiError(body?.message ?? `The logo was not saved (HTTP ${response.status})`, body?.code ?? "http_error");
  }
}

/** Brand: how the merchant appears on its payers' checkout and payment-link pages. Owners edit; everyone else reads. */
export function BrandSettings({ session }: { session: Session }) {
  const brand = useQuery(BRAND);
  const owner = session.user.role === "owner";
  return (
    <section>
      <PageHeader title="Brand" />
      <p class="muted">Your name, logo, colour and support e-mail on the pages where payers pay you (hosted checkout and payment links) and on the e-mails they get, in test and live mode.</p>
      <ErrorNote message={brand.error} />
      {brand.loading && !brand.data && <Loading />}
      {brand.data &&
        (owner ? <BrandForm brand={brand.data.brand} onSaved={(saved) => brand.setData(() => ({ brand: saved }))} /> : <BrandReadOnly brand={brand.data.brand} />)}
    </section>
  );
}

function LogoImage({ src, name }: { src: string; name: string }) {
  return <img class="brand-logo" src={src} alt={`${name} logo`} />;
}

function BrandReadOnly({ brand }: { brand: Brand }) {
  const name = brand.displayName ?? brand.merchantName;
  return (
    <>
      <p class="hint" id="brand-read-only">
        Only an owner can change the brand.
      </p>
      <dl class="card fields" id="brand-fields">
        <div>
          <dt>Display name</dt>
          <dd id="brand-display-name">{name}</dd>
        </div>
        <div>
          <dt>Accent colour</dt>
          <dd id="brand-accent-color">{brand.accentColor ?? "The page's default"}</dd>
        </div>
        <div>
          <dt>Support e-mail</dt>
          <dd id="brand-support-email">{brand.supportEmail ?? "None"}</dd>
        </div>
        <div>
          <dt>Logo</dt>
          <dd>{brand.logoUrl ? <LogoImage src={brand.logoUrl} name={name} /> : "None"}</dd>
        </div>
        <div>
          <dt>Receipts to payers</dt>
          <dd id="brand-receipts-enabled">{brand.receiptsEnabled ? "E-mailed" : "Not e-mailed"}</dd>
        </div>
        <div>
          <dt>Reply-to address</dt>
          <dd id="brand-reply-to">{brand.replyTo ?? "The support e-mail"}</dd>
        </div>
        <div>
          <dt>Website</dt>
          <dd id="brand-website">{brand.website ?? "None"}</dd>
        </div>
        <div>
          <dt>Time zone</dt>
          <dd id="brand-timezone">{brand.timezone}</dd>
        </div>
        <div>
          <dt>Language</dt>
          <dd id="brand-language">{LANGUAGES[brand.language] ?? brand.language}</dd>
        </div>
      </dl>
    </>
  );
}

function BrandForm({ brand, onSaved }: { brand: Brand; onSaved: (brand: Brand) => void }) {
  const [merchantName, setMerchantName] = useState(brand.merchantName);
  const [displayName, setDisplayName] = useState(brand.displayName ?? "");
  const [accentColor, setAccentColor] = useState(brand.accentColor ?? "");
  const [supportEmail, setSupportEmail] = useState(brand.supportEmail ?? "");
  const [file, setFile] = useState<File | null>(null);
  const [preview, setPreview] = useState<string | null>(null);
  const [fileProblem, setFileProblem] = useState<string | null>(null);
  const [removeLogo, setRemoveLogo] = useState(false);
  const [receiptsEnabled, setReceiptsEnabled] = useState(brand.receiptsEnabled);
  const [replyTo, setReplyTo] = useState(brand.replyTo ?? "");
  const [website, setWebsite] = useState(brand.website ?? "");
  const [timezone, setTimezone] = useState(brand.timezone);
  const [language, setLanguage] = useState(brand.language);
  const [saved, setSaved] = useState(false);
  const contrast = contrastMessage(accentColor);

  // The chosen file is shown as a data: URL (the dashboard's CSP allows data: images, not blob:).
  useEffect(() => {
    setPreview(null);
    if (!file) return;
    const reader = new FileReader();
    reader.onload = () => setPreview(typeof reader.result === "string" ? reader.result : null);
    reader.readAsDataURL(file);
    return () => reader.abort();
  }, [file]);

  const choose = (chosen: File | null) => {
    setSaved(false);
    setFileProblem(null);
    if (chosen && chosen.size > MAX_LOGO_BYTES) {
      setFileProblem(`That file is ${Math.ceil(chosen.size / 1024)} KB; a logo may be at most 256 KB.`);
      setFile(null);
      return;
    }
    setFile(chosen);
    if (chosen) setRemoveLogo(false);
  };

  const submit = async () => {
    setSaved(false);
    if (fileProblem) throw new ApiError(fileProblem, "validation_failed");
    // The text first: a refused colour or e-mail then leaves the logo as it was too.
    let result: Brand = await mutate(UPDATE, "updateBrand", {
      input: {
        merchantName: merchantName.trim(),
        displayName: displayName.trim() || null,
        accentColor: accentColor.trim() || null,
        supportEmail: supportEmail.trim() || null,
        removeLogo: removeLogo && !file,
        receiptsEnabled,
        replyTo: replyTo.trim() || null,
        website: website.trim() || null,
        timezone: timezone.trim(),
        language,
      },
    });
    if (file) {
      await uploadLogo(file);
      result = (await gql(BRAND)).brand;
      setFile(null);
    }
    setRemoveLogo(false);
    // Dates shown from now on are in the zone just saved.
    setDisplayTimeZone(result.timezone);
    onSaved(result);
    setSaved(true);
    announce("Brand saved");
  };

  const shownLogo = preview ?? (removeLogo ? null : brand.logoUrl);
  const pageName = displayName.trim() || merchantName.trim() || brand.merchantName;
  const swatch = contrast?.ok ? accentColor.trim() : undefined;
  return (
    <CardForm
      title="Brand settings"
      titleId="brand-title"
      id="brand-form"
      submit="Save brand"
      onSubmit={submit}
      status={
        saved ? (
          <p class="ok" role="status" id="brand-saved">
            Brand saved.
          </p>
        ) : null
      }
    >
      <div class="grid">
        <div class="field">
          <label for="brand-merchant-name">Business name</label>
          <input id="brand-merchant-name" type="text" required maxLength={200} aria-describedby="brand-merchant-name-hint" value={merchantName} onInput={(e) => setMerchantName(e.currentTarget.value)} />
          <p class="hint" id="brand-merchant-name-hint">
            Your merchant's name in the dashboard, and on payers' pages unless a display name is set.
          </p>
        </div>
        <div class="field">
          <label for="brand-display-name">Display name</label>
          <input id="brand-display-name" type="text" maxLength={100} placeholder={merchantName} aria-describedby="brand-display-name-hint" value={displayName} onInput={(e) => setDisplayName(e.currentTarget.value)} />
          <p class="hint" id="brand-display-name-hint">
            Empty: payers see {merchantName.trim() || brand.merchantName}.
          </p>
        </div>
        <div class="field">
          <label for="brand-support-email">Support e-mail</label>
          <input id="brand-support-email" type="email" maxLength={254} autoComplete="email" value={supportEmail} onInput={(e) => setSupportEmail(e.currentTarget.value)} />
        </div>
        <div class="field">
          <label for="brand-accent-color">Accent colour</label>
          <div class="brand-colour">
            <input id="brand-accent-color" type="text" maxLength={7} placeholder="#1a56db" autoComplete="off" spellcheck={false} aria-describedby="brand-contrast" value={accentColor} onInput={(e) => setAccentColor(e.currentTarget.value)} />
            <input
              id="brand-accent-picker"
              type="color"
              aria-label="Pick the accent colour"
              value={COLOR.test(accentColor.trim()) ? accentColor.trim().toLowerCase() : "#2454d6"}
              onInput={(e) => setAccentColor(e.currentTarget.value)}
            />
          </div>
          <p id="brand-contrast" class={contrast ? (contrast.ok ? "hint contrast-ok" : "hint contrast-low") : "hint"} aria-live="polite">
            {contrast?.text ?? "Empty: the page's own blue. Buttons carry white text on this colour."}
          </p>
        </div>
      </div>
      <fieldset class="field">
        <legend>Logo</legend>
        <p class="hint" id="brand-logo-hint">
          PNG, JPEG or WebP, at most 256 KB and 4096x4096 pixels. It is stored by the gateway and shown at the top of your payment pages.
        </p>
        <label for="brand-logo" class="visually-hidden">
          Logo file
        </label>
        <input id="brand-logo" type="file" accept="image/png,image/jpeg,image/webp" aria-describedby="brand-logo-hint" onChange={(e) => choose(e.currentTarget.files?.[0] ?? null)} />
        <ErrorNote message={fileProblem} />
        {brand.logoUrl && !file && (
          <div class="checkbox">
            <label>
              <input id="brand-remove-logo" type="checkbox" checked={removeLogo} onChange={(e) => setRemoveLogo(e.currentTarget.checked)} /> Remove the logo
            </label>
          </div>
        )}
      </fieldset>
      <div class="brand-preview" id="brand-preview" aria-label="Preview">
        <p class="hint">Preview</p>
        {shownLogo && <LogoImage src={shownLogo} name={pageName} />}
        <p class="brand-preview-name">{pageName}</p>
        <span class="brand-preview-button" style={swatch ? { background: swatch } : undefined}>
          Pay
        </span>
      </div>
      <fieldset class="field" id="brand-mail">
        <legend>Receipts and e-mail</legend>
        <div class="checkbox field">
          <label class="inline">
            <input id="brand-receipts-enabled" type="checkbox" checked={receiptsEnabled} aria-describedby="brand-receipts-hint" onChange={(e) => setReceiptsEnabled(e.currentTarget.checked)} /> E-mail payers a receipt
          </label>
          <p class="hint muted" id="brand-receipts-hint">
            For each completed payment and refund, to the e-mail the payer gave, and invoices to subscribers. Your team's notices are sent either way.
          </p>
        </div>
        <div class="grid">
          <div class="field">
            <label for="brand-reply-to">Reply-to address</label>
            <input id="brand-reply-to" type="email" maxLength={254} autoComplete="off" placeholder={brand.supportEmail ?? ""} aria-describedby="brand-reply-to-hint" value={replyTo} onInput={(e) => setReplyTo(e.currentTarget.value)} />
            <p class="hint muted" id="brand-reply-to-hint">
              Where payers' replies go. Empty: the support e-mail.
            </p>
          </div>
          <div class="field">
            <label for="brand-website">Website</label>
            <input id="brand-website" type="url" maxLength={200} autoComplete="url" placeholder="https://shop.example" aria-describedby="brand-website-hint" value={website} onInput={(e) => setWebsite(e.currentTarget.value)} />
            <p class="hint muted" id="brand-website-hint">
              An https:// address: receipts and the checkout's success page link back to it.
            </p>
          </div>
          <div class="field">
            <label for="brand-timezone">Time zone</label>
            <input
              id="brand-timezone"
              type="text"
              required
              maxLength={64}
              autoComplete="off"
              spellcheck={false}
              list="brand-timezones"
              aria-describedby="brand-timezone-hint"
              value={timezone}
              onInput={(e) => setTimezone(e.currentTarget.value)}
            />
            <datalist id="brand-timezones">
              {COMMON_ZONES.map((zone) => (
                <option key={zone} value={zone} />
              ))}
            </datalist>
            <p class="hint muted" id="brand-timezone-hint">
              An IANA name such as Africa/Nairobi: the days of the overview, the date filters and the reports, the times shown here and on receipts, and the day of the daily summary.
            </p>
          </div>
          <div class="field">
            <label for="brand-language">Language</label>
            <select id="brand-language" aria-describedby="brand-language-hint" value={language} onChange={(e) => setLanguage(e.currentTarget.value)}>
              {Object.entries(LANGUAGES).map(([code, name]) => (
                <option key={code} value={code}>
                  {name}
                </option>
              ))}
            </select>
            <p class="hint muted" id="brand-language-hint">
              Of your team's notices, and of receipts when the payer did not choose one on the checkout page.
            </p>
          </div>
        </div>
      </fieldset>
    </CardForm>
  );
}

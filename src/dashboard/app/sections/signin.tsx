import { useState } from "preact/hooks";
import { useFocusOnMount } from "../forms.tsx";
import { AuthError, signIn, type Mode } from "../session.ts";
import { ErrorNote } from "../ui.tsx";

export function SignIn({ notice }: { notice?: string | null }) {
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [mode, setMode] = useState<Mode>("test");
  // Shown once the server asks which merchant (an e-mail that is a user at several), or left empty.
  const [askMerchant, setAskMerchant] = useState(false);
  const [merchantId, setMerchantId] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const emailRef = useFocusOnMount<HTMLInputElement>();

  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await signIn(email, password, mode, askMerchant && /^\d+$/.test(merchantId) ? Number(merchantId) : undefined);
    } catch (failure) {
      if (failure instanceof AuthError && failure.code === "validation_failed" && failure.message.startsWith("merchant_id")) {
        setAskMerchant(true);
        setError("This e-mail signs in to more than one merchant: enter the merchant's ID (ask its owner, or see the CLI's merchant list).");
      } else if (failure instanceof AuthError && failure.code === "invalid_credentials") setError("Wrong e-mail or password.");
      else if (failure instanceof AuthError && failure.retryAfterSeconds) setError(`Too many attempts. Try again in ${Math.ceil(failure.retryAfterSeconds / 60)} minute(s).`);
      else setError(failure instanceof Error ? failure.message : "Sign-in failed");
      setBusy(false);
    }
  };

  return (
    <main class="signin" id="main">
      <form class="card signin-card" onSubmit={submit} aria-labelledby="signin-title">
        <h1 id="signin-title">Sign in to the dashboard</h1>
        {notice && <p class="muted">{notice}</p>}
        <label for="signin-email">E-mail</label>
        <input id="signin-email" ref={emailRef} type="email" name="email" autoComplete="username" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
        <label for="signin-password">Password</label>
        <input id="signin-password" type="password" name="password" autoComplete="current-password" required value={password} onInput={(e) => setPassword(e.currentTarget.value)} />
        {askMerchant && (
          <>
            <label for="signin-merchant">Merchant ID</label>
            <input id="signin-merchant" name="merchant_id" inputMode="numeric" pattern="[0-9]+" required value={merchantId} onInput={(e) => setMerchantId(e.currentTarget.value)} />
          </>
        )}
        <fieldset class="mode-choice">
          <legend>Mode</legend>
          <label class="inline">
            <input type="radio" name="mode" value="test" checked={mode === "test"} onChange={() => setMode("test")} /> Test
          </label>
          <label class="inline">
            <input type="radio" name="mode" value="live" checked={mode === "live"} onChange={() => setMode("live")} /> Live
          </label>
        </fieldset>
        <ErrorNote message={error} />
        <button type="submit" disabled={busy}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
      </form>
    </main>
  );
}

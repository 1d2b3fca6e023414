/**
 * No secret in a gateway's output: every gateway process a test starts (process.ts) is watched, and what it wrote
 * to stdout and stderr is searched for whole API keys (sk_test_/sk_live_ and 32 characters; the 8-character
 * prefixes that identify a key are not secrets), webhook signing secrets (whsec_...) and every password a test
 * registered (registerSecret: user helpers and `runCli --password-stdin` do). The one exception is the banner a
 * development start prints to its terminal on purpose (the demo's test key and owner password, shown once).
 *
 * Searched once per line as output arrives' lines complete, so it costs about nothing; checkSecretsInLogs(), run
 * after each test and each file by secrets-in-logs.setup.ts, fails the test with the lines that leaked.
 */

const KEY = /sk_(?:test|live)_[A-Za-z0-9_-]{20,}/;
const WEBHOOK_SECRET = /whsec_[A-Za-z0-9+/=]{16,}/;
/** The development banner's lines (src/main.ts): the demo's key and password go to the terminal, never a log line. */
const BANNER = /^ {2}(?:Test API key \(shown once, keep it\): |Try: curl -H "X-API-Key: sk_test_|Dashboard: \S+ {2}e-mail \S+ {2}password \(shown once\) )/;

const secrets = new Set<string>();
const leaks: string[] = [];

/** A password (or other secret) the test set: no watched process may print it. Short strings are ignored. */
export function registerSecret(secret: string | undefined): void {
  if (secret && secret.length >= 8) secrets.add(secret);
}

/** What a watched process hands in: each complete line once (a partial last line waits for the rest or the exit). */
export function watchOutput(name: string): { write(chunk: string): void; end(): void } {
  let pending = "";
  const check = (line: string) => {
    if (BANNER.test(line)) return;
    const found = KEY.exec(line)?.[0] ?? WEBHOOK_SECRET.exec(line)?.[0] ?? [...secrets].find((secret) => line.includes(secret));
    if (found) leaks.push(`${name} printed a secret (${found.slice(0, 12)}...): ${line.slice(0, 500)}`);
  };
  return {
    write(chunk) {
      pending += chunk;
      const lines = pending.split("\n");
      pending = lines.pop()!;
      for (const line of lines) check(line);
    },
    end() {
      if (pending) check(pending);
      pending = "";
    },
  };
}

/** Throws (once per leak) when a watched process printed a secret since the last check. */
export function checkSecretsInLogs(): void {
  if (leaks.length === 0) return;
  const found = leaks.splice(0);
  throw new Error(`A gateway process wrote a secret to its output (a log line must never hold one):\n${found.join("\n")}`);
}

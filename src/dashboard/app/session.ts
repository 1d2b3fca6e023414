import { useEffect, useState } from "preact/hooks";

/**
 * The signed-in user's session. The access token lives in memory only; the refresh token in
 * sessionStorage, so a reload keeps the session but closing the tab ends it. Refresh tokens rotate:
 * each is usable once, so every refresh goes through one queue (two at once would look like theft).
 */
export type Mode = "test" | "live";
export type Role = "owner" | "developer" | "viewer";
export interface User {
  id: number;
  email: string;
  role: Role;
  merchant_id: number;
}
export interface Session {
  user: User;
  mode: Mode;
}
interface TokenResponse extends Session {
  access_token: string;
  expires_in: number;
  refresh_token: string;
}

const REFRESH_KEY = "gateway.dashboard.refresh";
const REFRESH_EARLY_SECONDS = 60;

let accessToken: string | null = null;
let accessTokenExpiresAt = 0;
let current: Session | null = null;
let refreshTimer: ReturnType<typeof setTimeout> | undefined;
let queue: Promise<unknown> = Promise.resolve();
let pendingRefresh: Promise<boolean> | null = null;
const listeners = new Set<(session: Session | null) => void>();
const tokenListeners = new Set<(token: string, mode: Mode) => void>();

/** Told of every new access token (a sign-in or a silent refresh): the live connection passes it on before the old one expires. */
export function onAccessToken(listener: (token: string, mode: Mode) => void): () => void {
  tokenListeners.add(listener);
  return () => void tokenListeners.delete(listener);
}

/** A refused auth request (or another REST error), with the envelope's code. */
export class AuthError extends Error {
  constructor(
    message: string,
    readonly code: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

export const getAccessToken = () => accessToken;

/** The access token, refreshed first when it is about to expire (e.g. after the tab slept through the timer). */
export async function freshAccessToken(): Promise<string | null> {
  if (accessToken && Date.now() > accessTokenExpiresAt - 10_000) await refresh().catch(() => false);
  return accessToken;
}
export const getSession = () => current;

/** Owners do everything; developers change test-mode data only; viewers read. */
export function canWrite(session: Session | null): boolean {
  return session !== null && (session.user.role === "owner" || (session.user.role === "developer" && session.mode === "test"));
}

function emit() {
  listeners.forEach((listener) => listener(current));
}

async function postAuth(path: string, body: Record<string, unknown>): Promise<TokenResponse> {
  const response = await fetch(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const envelope = (await response.json().catch(() => null)) as { status?: string; data?: TokenResponse; message?: string; code?: string } | null;
  if (!response.ok || envelope?.status !== "success" || !envelope.data) {
    const retryAfter = Number(response.headers.get("retry-after")) || undefined;
    throw new AuthError(envelope?.message ?? `Request failed (HTTP ${response.status})`, envelope?.code ?? "http_error", retryAfter);
  }
  return envelope.data;
}

function adopt(data: TokenResponse) {
  accessToken = data.access_token;
  accessTokenExpiresAt = Date.now() + data.expires_in * 1000;
  sessionStorage.setItem(REFRESH_KEY, data.refresh_token);
  current = { user: data.user, mode: data.mode };
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(() => void refresh(), Math.max(5, data.expires_in - REFRESH_EARLY_SECONDS) * 1000);
  emit();
  tokenListeners.forEach((listener) => listener(data.access_token, data.mode));
}

/** Forgets the session locally (the sign-in screen shows). */
export function clearSession() {
  accessToken = null;
  current = null;
  clearTimeout(refreshTimer);
  sessionStorage.removeItem(REFRESH_KEY);
  emit();
}

/** Runs auth requests one after another, so a rotated refresh token is never presented twice. */
function serialized<T>(task: () => Promise<T>): Promise<T> {
  const run = queue.then(task, task);
  queue = run.catch(() => undefined);
  return run;
}

/** `merchantId`: which merchant to sign in to, when the e-mail is a user at several (the server then asks for it). */
export function signIn(email: string, password: string, mode: Mode, merchantId?: number): Promise<void> {
  return serialized(async () => adopt(await postAuth("/v1/auth/login", { email, password, mode, ...(merchantId ? { merchant_id: merchantId } : {}) })));
}

/**
 * A new token pair (optionally in another mode). Answers false, and signs out, when the refresh token
 * is refused; concurrent callers without a mode share one refresh.
 */
export function refresh(mode?: Mode): Promise<boolean> {
  if (mode === undefined && pendingRefresh) return pendingRefresh;
  const run = serialized(async () => {
    const token = sessionStorage.getItem(REFRESH_KEY);
    if (!token) {
      if (current) clearSession();
      return false;
    }
    try {
      adopt(await postAuth("/v1/auth/refresh", mode ? { refresh_token: token, mode } : { refresh_token: token }));
      return true;
    } catch (error) {
      // A refused token ends the session; a network failure or 5xx leaves it to try again later.
      if (error instanceof AuthError && error.code !== "http_error" && error.code !== "service_unavailable" && error.code !== "rate_limited") clearSession();
      else throw error;
      return false;
    }
  });
  if (mode === undefined) {
    pendingRefresh = run;
    void run.finally(() => {
      if (pendingRefresh === run) pendingRefresh = null;
    }).catch(() => undefined);
  }
  return run;
}

export const switchMode = (mode: Mode) => refresh(mode);

/** Revokes the session at the gateway (best effort: offline, it is still forgotten here). */
export function signOut(): Promise<void> {
  return serialized(async () => {
    const token = sessionStorage.getItem(REFRESH_KEY);
    if (token) {
      await fetch("/v1/auth/logout", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ refresh_token: token }) }).catch(() => undefined);
    }
    clearSession();
  });
}

/** On page load: a refresh token in this tab's storage resumes the session. */
export function hasStoredSession(): boolean {
  return sessionStorage.getItem(REFRESH_KEY) !== null;
}

export function useSession(): Session | null {
  const [session, setSession] = useState(current);
  useEffect(() => {
    listeners.add(setSession);
    setSession(current);
    return () => void listeners.delete(setSession);
  }, []);
  return session;
}

import type { ComponentChildren } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { errorMessage, gql, type Document } from "./api.ts";
import { titleCase } from "./format.ts";
import { BASE, onLinkClick } from "./router.ts";

/** Loads a query when its variables change; `reload` runs it again, `setData` edits the result locally. */
export function useQuery<T, V>(query: Document<T, V>, variables: V | Record<string, never> = {}) {
  const key = JSON.stringify(variables);
  // `of` is the variables the data answers; stale data of other variables is never shown beside an error.
  const [state, setState] = useState<{ data: T | null; of: string; error: string | null; loading: boolean }>({ data: null, of: key, error: null, loading: true });
  const latest = useRef(0);
  const reload = useCallback(async () => {
    const run = ++latest.current;
    setState((previous) => ({ ...previous, loading: true }));
    try {
      const data = await gql<T, V>(query, JSON.parse(key) as V);
      if (run === latest.current) setState({ data, of: key, error: null, loading: false });
    } catch (error) {
      if (run === latest.current) setState((previous) => ({ data: previous.of === key ? previous.data : null, of: key, error: errorMessage(error), loading: false }));
    }
  }, [query, key]);
  useEffect(() => void reload(), [reload]);
  const setData = useCallback((update: (data: T) => T) => setState((previous) => (previous.data ? { ...previous, data: update(previous.data) } : previous)), []);
  return { data: state.data, error: state.error, loading: state.loading, reload, setData };
}

/** Runs a write and keeps its error message; `busy` disables the button meanwhile. */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const run = useCallback(async <T,>(action: () => Promise<T>): Promise<T | undefined> => {
    setBusy(true);
    setError(null);
    try {
      return await action();
    } catch (failure) {
      setError(errorMessage(failure));
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, run, setError };
}

export function PageHeader({ title, children }: { title: string; children?: ComponentChildren }) {
  return (
    <div class="page-header">
      <h1 tabIndex={-1}>{title}</h1>
      {children && <div class="page-actions">{children}</div>}
    </div>
  );
}

export function ErrorNote({ message }: { message: string | null }) {
  return message ? (
    <p class="error" role="alert">
      {message}
    </p>
  ) : null;
}

export function Loading() {
  return <p class="muted" aria-busy="true">Loading…</p>;
}

export function EmptyState({ title, children }: { title: string; children?: ComponentChildren }) {
  return (
    <div class="empty">
      <h2>{title}</h2>
      {children}
    </div>
  );
}

/** The "← All ..." link above a detail page, back to its list. */
export function BackLink({ route, label }: { route: string; label: string }) {
  return (
    <a href={`${BASE}${route}`} onClick={(e) => onLinkClick(e, route)} class="back">
      ← {label}
    </a>
  );
}

/**
 * A detail page without its object: "Loading…" or the load's error while there is no answer, and with `notFound`
 * (the answer was an error result) its title and the API's message.
 */
export function DetailMissing({ back, loading, error, notFound }: { back: ComponentChildren; loading: boolean; error: string | null; notFound?: { title: string; message: string } }) {
  return (
    <section>
      {back}
      {notFound ? (
        <>
          <PageHeader title={notFound.title} />
          <p>{notFound.message}</p>
        </>
      ) : loading ? (
        <Loading />
      ) : (
        <ErrorNote message={error} />
      )}
    </section>
  );
}

/** One name and value of a detail card. */
export type DetailField = [string, ComponentChildren];

/** A detail page's card of fields, each name over its value; `children` adds fields of their own shape. */
export function DetailFields({ id, fields, children }: { id: string; fields: DetailField[]; children?: ComponentChildren }) {
  return (
    <dl class="card fields" id={id}>
      {fields.map(([name, value]) => (
        <div key={name}>
          <dt>{name}</dt>
          <dd>{value}</dd>
        </div>
      ))}
      {children}
    </dl>
  );
}

export function Badge({ value, kind = value }: { value: string; kind?: string }) {
  return <span class={`badge badge-${kind}`}>{titleCase(value)}</span>;
}

/** A table that scrolls sideways inside its own box on narrow screens, never the page. */
export function TableWrap({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    <div class="table-wrap" role="region" aria-label={label} tabIndex={0}>
      <table>{children}</table>
    </div>
  );
}

/** A secret the gateway shows only once (API key, webhook signing secret), with a copy button. */
export function SecretOnce({ label, secret, onDone }: { label: string; secret: string; onDone: () => void }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(secret);
      setCopied(true);
    } catch {
      // Clipboard refused (e.g. insecure origin): select the text so the user can copy it.
      const range = document.createRange();
      const node = document.getElementById("secret-value");
      if (node) {
        range.selectNodeContents(node);
        getSelection()?.removeAllRanges();
        getSelection()?.addRange(range);
      }
    }
  };
  return (
    <div class="secret" role="status">
      <h2>{label}</h2>
      <p class="warning">Copy it now: it is shown only once and cannot be retrieved later.</p>
      <code id="secret-value" class="secret-value">
        {secret}
      </code>
      <div class="row">
        <button type="button" onClick={copy}>
          {copied ? "Copied" : "Copy"}
        </button>
        <button type="button" class="secondary" onClick={onDone}>
          I have saved it
        </button>
      </div>
    </div>
  );
}

/** A destructive button that asks once more, inline (no window.confirm). */
export function ConfirmButton({ label, question, confirmLabel, onConfirm, disabled }: { label: string; question: string; confirmLabel: string; onConfirm: () => void; disabled?: boolean }) {
  const [asking, setAsking] = useState(false);
  const confirmRef = useRef<HTMLButtonElement>(null);
  const triggerRef = useRef<HTMLButtonElement>(null);
  const asked = useRef(false);
  // Focus follows the question: onto the confirm button, and back to the trigger on Cancel or Escape.
  useEffect(() => {
    if (asking) confirmRef.current?.focus();
    else if (asked.current) triggerRef.current?.focus();
    asked.current = asking;
  }, [asking]);
  if (!asking) {
    return (
      <button ref={triggerRef} type="button" class="danger-outline small" disabled={disabled} onClick={() => setAsking(true)}>
        {label}
      </button>
    );
  }
  return (
    <span class="confirm" role="group" aria-label={question} onKeyDown={(event) => event.key === "Escape" && setAsking(false)}>
      <span class="confirm-question">{question}</span>
      <button
        ref={confirmRef}
        type="button"
        class="danger small"
        onClick={() => {
          setAsking(false);
          onConfirm();
        }}
      >
        {confirmLabel}
      </button>
      <button type="button" class="secondary small" onClick={() => setAsking(false)}>
        Cancel
      </button>
    </span>
  );
}

const announcers = new Set<(text: string) => void>();

/** Says something to screen readers through the polite live region. */
export function announce(text: string) {
  announcers.forEach((announcer) => announcer(text));
}

export function LiveRegion() {
  const [text, setText] = useState("");
  useEffect(() => {
    announcers.add(setText);
    return () => void announcers.delete(setText);
  }, []);
  return (
    <div class="visually-hidden" aria-live="polite" aria-atomic="true" id="live-region">
      {text}
    </div>
  );
}

import { useState } from "preact/hooks";
import { fetchAsUser } from "./api.ts";

/** A report's URL with the filters that are set (empty ones left out). */
export function reportUrl(path: string, filters: Record<string, string | number | null | undefined>): string {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(filters)) if (value !== null && value !== undefined && value !== "") query.set(name, String(value));
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

/** The file name the gateway gives (Content-Disposition), else `fallback`. */
function fileName(response: Response, fallback: string): string {
  const match = /filename="?([^";]+)"?/i.exec(response.headers.get("content-disposition") ?? "");
  return match?.[1] ?? fallback;
}

/**
 * "Export CSV": a link to the report, which the click fetches with the session's bearer token (the access
 * token lives in this tab's memory, so a plain navigation would not be signed in) and saves as a file.
 */
export function ExportCsv({ href, fallbackName, id }: { href: string; fallbackName: string; id?: string }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);

  const download = async (event: MouseEvent) => {
    event.preventDefault();
    if (busy) return;
    setBusy(true);
    setError(null);
    try {
      const response = await fetchAsUser(href, { headers: { accept: "text/csv" } });
      if (!response.ok) {
        const body = (await response.json().catch(() => null)) as { message?: string } | null;
        throw new Error(body?.message ?? `The export failed (HTTP ${response.status})`);
      }
      const url = URL.createObjectURL(await response.blob());
      const link = document.createElement("a");
      link.href = url;
      link.download = fileName(response, fallbackName);
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (failure) {
      setError(failure instanceof TypeError ? "The gateway cannot be reached; check your connection" : failure instanceof Error ? failure.message : String(failure));
    } finally {
      setBusy(false);
    }
  };

  return (
    <span class="export">
      <a class="button secondary small" href={href} id={id} download={fallbackName} onClick={(event) => void download(event)} aria-busy={busy}>
        {busy ? "Exporting…" : "Export CSV"}
      </a>
      {error && (
        <span class="error inline" role="alert">
          {error}
        </span>
      )}
    </span>
  );
}
